"""A real OCI registry for the oci:// image tests: Debian's `docker-registry` (distribution
2.8) on 127.0.0.1 only, its filesystem store under the test's directory, htpasswd (basic)
authentication, plain HTTP (Ironic then needs [oci]permit_fallback_to_http_transport).
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

from tests.ironic import realenv
from tests.vmbench import procs

REGISTRY = "/usr/bin/docker-registry"
SKOPEO = "/usr/bin/skopeo"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"


def missing():
    return [p for p in (REGISTRY, SKOPEO) if not os.path.exists(p)]


class Registry:
    def __init__(self, workdir, user="puller", password="pull-s3cret-Xq7"):
        self.dir = os.path.join(workdir, "registry")
        os.makedirs(self.dir, exist_ok=True)
        self.user, self.password = user, password
        self.port = realenv.free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"
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
            return requests.get(self.url + "/v2/", timeout=1).status_code == 401
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
                        "--dest-tls-verify=false", "--authfile",
                        os.path.join(self.dir, "auth.json"), f"oci:{layout}:{tag}",
                        f"docker://{self.host}/{repo}:{tag}"],
                       check=True, capture_output=True, timeout=120)
        return layer["digest"], described["digest"]

    def stop(self):
        procs.stop(self.proc)
        if self.proc is not None:
            self.log.close()


def skip_on_an_ironic_without_plain_http():
    """Skips the calling test on an Ironic that cannot reach this registry at all: before 35
    (2026.1) there is no [oci]permit_fallback_to_http_transport, and Ironic's OCI client
    builds https:// URLs only (ironic_compat.oci_speaks_plain_http), while this registry
    speaks plain HTTP. Only in the series env (tox -e ironic-series sets IRONIC_VERSION) and
    only below 35: anywhere else, or on 35 and later, the option missing fails the test."""
    import pytest

    from ironic_driver import ironic_compat
    if ironic_compat.oci_speaks_plain_http():
        return
    version = ironic_compat.installed_version()
    why = (f"Ironic {version} has no [oci]permit_fallback_to_http_transport (added in 35, "
           f"OpenStack 2026.1): its OCI client reaches registries only over HTTPS, and "
           f"this suite's registry (tests/ironic/realregistry.py) speaks plain HTTP")
    if not os.environ.get("IRONIC_VERSION") or ironic_compat.release(version) >= (35, 0):
        pytest.fail(why)
    pytest.skip(why)


def ironic_conf():
    """The registry speaks plain HTTP: Ironic's OCI client tries HTTPS first and falls back
    only when told to."""
    return "[oci]\npermit_fallback_to_http_transport = true\n"
