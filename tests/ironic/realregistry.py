"""A real OCI registry for the oci:// image tests: Debian's `docker-registry` (distribution
2.8) on 127.0.0.1 only, its filesystem store under the test's directory, htpasswd (basic)
authentication, HTTPS with a certificate of a CA made in the test (testca.py), as a private
registry on a provisioning network has. Every supported Ironic reaches it: from 35 (2026.1)
[oci]verify_ca names the CA; 29.x and 32.x have no such option and verify against the
conductor's CA bundle, REQUESTS_CA_BUNDLE in its environment (ironic_compat.oci_tls_advice,
docs/ironic.md section 6). So ironic_conf() and ironic_env() give Ironic the CA each way.
Artifacts are pushed with `skopeo` from an OCI image layout written here, in the shape
Ironic's OciImageService looks for: an image index whose manifest descriptors carry a
`disktype` annotation, each manifest with an empty config and one layer, the disk image
(application/zstd, gzip or octet-stream, titled by org.opencontainers.image.title).
Both programs come from scripts/host-packages.sh."""

import hashlib
import json
import os
import shutil
import subprocess

import requests

from tests import testca
from tests.ironic import realenv
from tests.vmbench import procs

REGISTRY = "/usr/bin/docker-registry"
SKOPEO = "/usr/bin/skopeo"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"


def missing():
    return [p for p in (REGISTRY, SKOPEO) if not os.path.exists(p)]


def make_ca(workdir):
    """The CA the registries of a test sign with: give it to Ironic before it starts."""
    return testca.CA(os.path.join(workdir, "registry-ca"))


class Registry:
    def __init__(self, workdir, ca, user="puller", password="pull-s3cret-Xq7"):
        """ca: a testca.CA; the registry's certificate, signed by it, names 127.0.0.1 and
        localhost."""
        self.dir = os.path.join(workdir, "registry")
        os.makedirs(self.dir, exist_ok=True)
        self.user, self.password = user, password
        self.port = realenv.free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"https://{self.host}"
        self.ca = ca.bundle
        self.cert, self.key = ca.server(f"registry-{self.port}")
        # skopeo's --dest-cert-dir: the CAs to trust are its *.crt files
        self.cert_dir = os.path.join(self.dir, "certs.d")
        os.makedirs(self.cert_dir, exist_ok=True)
        shutil.copyfile(self.ca, os.path.join(self.cert_dir, "ca.crt"))
        self.proc = None

    def start(self, timeout=30):
        import bcrypt  # Ironic's own dependency; the registry takes bcrypt only
        hashed = bcrypt.hashpw(self.password.encode(), bcrypt.gensalt(rounds=5)).decode()
        with open(os.path.join(self.dir, "htpasswd"), "w") as f:
            f.write(f"{self.user}:{hashed}\n")
        with open(os.path.join(self.dir, "config.yml"), "w") as f:
            f.write(f"""version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: {self.dir}/data
http:
  addr: {self.host}
  tls:
    certificate: {self.cert}
    key: {self.key}
auth:
  htpasswd:
    realm: provision-tests
    path: {self.dir}/htpasswd
""")
        self.log = open(os.path.join(self.dir, "registry.log"), "w")
        self.proc = subprocess.Popen([REGISTRY, "serve", os.path.join(self.dir, "config.yml")],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        realenv.wait_for(self._up, timeout, what="the registry")
        with open(os.path.join(self.dir, "auth.json"), "w") as f:     # skopeo's --authfile
            json.dump({"auths": {self.host: {"auth": self.basic().split()[1]}}}, f)
        return self

    def _up(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"docker-registry exited with {self.proc.returncode}; see "
                               f"{self.dir}/registry.log")
        try:
            return requests.get(self.url + "/v2/", timeout=1, verify=self.ca).status_code == 401
        except requests.RequestException:
            return False

    def basic(self):
        import base64
        return "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()

    def push(self, repo, tag, data, disktype="raw", media_type="application/zstd",
             title="disk.raw.zst"):
        """Pushes data as the one layer of an artifact tagged repo:tag. Returns the blob's
        and the manifest's digests (sha256:...)."""
        layout = os.path.join(self.dir, "layouts", repo.replace("/", "_") + "-" + tag)
        shutil.rmtree(layout, ignore_errors=True)
        os.makedirs(os.path.join(layout, "blobs", "sha256"))

        def blob(content):
            digest = hashlib.sha256(content).hexdigest()
            with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
                f.write(content)
            return {"digest": f"sha256:{digest}", "size": len(content)}

        layer = dict(blob(data), mediaType=media_type,
                     annotations={"org.opencontainers.image.title": title})
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST,
                    "artifactType": "application/vnd.provision-tests.disk",
                    "config": dict(blob(b"{}"), mediaType=EMPTY), "layers": [layer],
                    "annotations": {"disktype": disktype}}
        described = dict(blob(json.dumps(manifest).encode()), mediaType=MANIFEST,
                         annotations={"disktype": disktype},
                         platform={"architecture": "amd64", "os": "linux"})
        index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": [described]}
        top = {"schemaVersion": 2, "manifests": [
            dict(blob(json.dumps(index).encode()), mediaType=INDEX,
                 annotations={"org.opencontainers.image.ref.name": tag})]}
        with open(os.path.join(layout, "index.json"), "w") as f:
            json.dump(top, f)
        with open(os.path.join(layout, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        subprocess.run([SKOPEO, "copy", "--quiet", "--all", "--preserve-digests",
                        "--dest-cert-dir", self.cert_dir, "--authfile",
                        os.path.join(self.dir, "auth.json"), f"oci:{layout}:{tag}",
                        f"docker://{self.host}/{repo}:{tag}"],
                       check=True, capture_output=True, timeout=120)
        return layer["digest"], described["digest"]

    def authorized(self, uri, agent="python-requests/"):
        """The registry's log lines of requests for uri (a part of the path) it authorized
        (the credentials were good), made by agent (Ironic's client: python-requests)."""
        with open(os.path.join(self.dir, "registry.log")) as f:
            return [line for line in f.read().splitlines()
                    if 'msg="authorized request"' in line and uri in line
                    and f"http.request.useragent={agent}" in line]

    def stop(self):
        procs.stop(self.proc)
        if self.proc is not None:
            self.log.close()


def _has_verify_ca():
    from ironic.conf import CONF
    return "verify_ca" in CONF.oci


def ironic_conf(ca):
    """Ironic's settings for registries signed by ca: from 35 (2026.1), [oci]verify_ca.
    Before it there is no [oci] option for it (ironic_env)."""
    return f"[oci]\nverify_ca = {ca.bundle}\n" if _has_verify_ca() else ""


def ironic_env(ca):
    """The environment Ironic runs in, for registries signed by ca: before 35, its OCI client
    verifies against the CA bundle requests is told of (REQUESTS_CA_BUNDLE), as
    docs/ironic.md tells operators of those releases; from 35 None (ironic_conf)."""
    return None if _has_verify_ca() else dict(os.environ, REQUESTS_CA_BUNDLE=ca.bundle)
