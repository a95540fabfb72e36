"""A real Glance (PyPI `glance`) for the Ironic tests: sqlite, file store, no Keystone.

Glance 33 no longer runs standalone (`glance-api` says "Deploy Glance under a WSGI server
using glance.wsgi.api:application"); gunicorn serves that application here. The venv is built
once per version under the project's cache (about 40 s) and reused.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import time

import requests

from tests.ironic import realenv
from tests.vmbench import procs

VERSION = "33.0.0"
CACHE = os.path.join(os.environ.get("PROVISION_AGENT_CACHE")
                     or os.path.expanduser("~/.cache/provision-agent"))
VENV = os.path.join(CACHE, f"glance-venv-{VERSION}")


def ensure_venv():
    """The venv's bin directory; builds it when missing (a failed build leaves nothing)."""
    bin_dir = os.path.join(VENV, "bin")
    done = os.path.join(VENV, ".complete")
    if os.path.exists(done):
        return bin_dir
    shutil.rmtree(VENV, ignore_errors=True)
    try:
        # A venv of its own: Glance's dependencies must not mix with Ironic's.
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([os.path.join(bin_dir, "pip"), "install", "-q", f"glance=={VERSION}",
                        "gunicorn"], check=True)
    except BaseException:
        shutil.rmtree(VENV, ignore_errors=True)
        raise
    open(done, "w").close()
    return bin_dir


class Glance:
    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "glance")
        os.makedirs(os.path.join(self.dir, "images"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "staging"), exist_ok=True)
        self.port = realenv.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self, timeout=120):
        bin_dir = ensure_venv()
        paste = os.path.join(VENV, "etc", "glance", "glance-api-paste.ini")
        shutil.copy(paste, os.path.join(self.dir, "glance-api-paste.ini"))
        with open(os.path.join(self.dir, "glance-api.conf"), "w") as f:
            f.write(f"""[DEFAULT]
debug = true
log_file = {self.dir}/glance-api.log
enabled_backends = fs:file
worker_self_reference_url = {self.url}
[database]
connection = sqlite:///{self.dir}/glance.sqlite
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = {self.dir}/images
[os_glance_staging_store]
filesystem_store_datadir = {self.dir}/staging
[os_glance_tasks_store]
filesystem_store_datadir = {self.dir}/staging
[paste_deploy]
# No Keystone: the 'default' pipeline, with an unauthenticated (admin) context.
flavor =
[oslo_policy]
# That context has no roles, which the new default rules ask for; the old defaults are
# open ("") for what the tests do (create, upload, show, download).
enforce_new_defaults = false
enforce_scope = false
""")
        env = dict(os.environ, OS_GLANCE_CONFIG_DIR=self.dir)
        subprocess.run([os.path.join(bin_dir, "glance-manage"), "--config-file",
                        os.path.join(self.dir, "glance-api.conf"), "db_sync"],
                       check=True, capture_output=True, env=env)
        self.out = open(os.path.join(self.dir, "gunicorn.out"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "gunicorn"), "--bind", f"127.0.0.1:{self.port}",
             "--workers", "1", "--threads", "4", "--timeout", "300",
             "glance.wsgi.api:application"],
            stdout=self.out, stderr=subprocess.STDOUT, env=env, cwd=self.dir)
        realenv.wait_for(self._up, timeout, what="the Glance API")
        return self

    def _up(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"glance exited with {self.proc.returncode}; see {self.dir}")
        try:
            return requests.get(self.url + "/v2/images", timeout=2).ok
        except requests.RequestException:
            return False

    def create_image(self, path, name, disk_format="raw", container_format="bare"):
        """Upload a file as an image; returns Glance's record once active."""
        image = requests.post(self.url + "/v2/images", timeout=30, json={
            "name": name, "disk_format": disk_format, "container_format": container_format,
            # Ironic only reads an image it can prove it may: public or community ones for a
            # requester without a project (noauth). 'public' needs Glance's admin role.
            "visibility": "community"}).json()
        with open(path, "rb") as f:
            resp = requests.put(f"{self.url}/v2/images/{image['id']}/file", data=f,
                                headers={"Content-Type": "application/octet-stream"},
                                timeout=300)
        resp.raise_for_status()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            record = requests.get(f"{self.url}/v2/images/{image['id']}", timeout=30).json()
            if record["status"] == "active":
                return record
            time.sleep(0.5)
        raise TimeoutError(f"image {image['id']} not active: {record['status']}")

    def stop(self):
        procs.stop(self.proc)


def file_digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ironic_conf(glance, workdir, http_url):
    """ironic.conf sections that make a noauth Ironic resolve Glance UUIDs and serve the
    cached image from workdir/httpboot at http_url ([agent]image_download_source http)."""
    return f"""[glance]
auth_type = none
endpoint_override = {glance.url}
[agent]
image_download_source = http
[deploy]
http_root = {workdir}/httpboot
http_url = {http_url}
[pxe]
images_path = {workdir}/images
instance_master_path = {workdir}/master_images
"""
