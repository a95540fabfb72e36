"""The ramdisk's side of Ironic's ramdisk API: find our node, then heartbeat.

ramdisk/init starts this when the kernel command line carries `ipa-api-url` (Ironic's boot
interfaces put it there from `deploy_utils.build_agent_options`). It does what the conductor
cannot know before the machine boots: it looks the node up by the machine's MAC addresses
(`GET /v1/lookup`), keeps the agent token Ironic hands out once, and heartbeats
(`POST /v1/heartbeat/{node}`) with

  callback_url     https://ADDRESS:SSH_PORT: where the conductor's SSH reaches this ramdisk.
                   Ironic accepts only http(s) URLs here (https only, by default); nothing
                   speaks HTTP on that port, the deploy interface reads the address and port
                   out of it.
  agent_verify_ca  this boot's SSH host public key. For ironic-python-agent the field holds
                   the TLS certificate the conductor must verify the agent with; ours is the
                   SSH equivalent. The heartbeat carries the agent token, so only the ramdisk
                   that won the lookup can set it, and Ironic refuses a later heartbeat whose
                   key differs ("Detected change in ramdisk provided agent_verify_ca").

After each lookup it writes the binding file (provision_agent/binding.py) that the conductor
reads over SSH before it sends anything: the heartbeat says where a ramdisk is, the binding
proves which node's lookup that ramdisk won.

With `ipa-inspection-callback-url` on the command line (Ironic's `agent` inspect interface) it
first posts the machine's inventory there (inspection.py), as ironic-python-agent does.

Provision itself is not run from here: the conductor runs it over SSH. The token and the
URL's credentials never reach a log line.
"""

import argparse
import ipaddress
import logging
import os
import random
import socket
import sys
import time
import urllib.parse

import requests
import tenacity

from provision_agent import binding, bounded_http, redact

LOG = logging.getLogger("provision-ironic-agent")

# 1.68: agent_verify_ca in heartbeats; lookup and agent_version are older.
API_VERSION = "1.68"
HEADERS = {"X-OpenStack-Ironic-API-Version": API_VERSION}
HIDDEN_TOKEN = "******"     # what lookup answers once the token went to an earlier lookup
DEFAULT_HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
# [provision_agent]binding_dir on the conductor: keep the two defaults equal. Outside what the
# image's chroot gets of /run (provision_agent/drivers/chroot.py).
DEFAULT_BINDING_DIR = "/run/provision-ironic-agent"
STARTUP_PAUSES = (3, 10, 30)
MAX_PARAM = 4096            # a kernel command line is at most a few KiB
# Ironic's answers to lookup and heartbeat are a node record: kilobytes. Whatever answers on
# ipa-api-url may send more, or send it slowly; the ramdisk's memory is the machine's RAM.
MAX_ANSWER = 1 << 20
ANSWER_SECONDS = 60


class Answer:
    """An HTTP answer, its body read in bounded memory and time (bounded_http)."""

    def __init__(self, status_code, body):
        self.status_code = status_code
        self.text = body.decode(errors="replace")

    def json(self):
        import json
        return json.loads(self.text)


def request(session, method, url, **kwargs):
    headers = dict(kwargs.pop("headers", {}), **bounded_http.NO_ENCODING)
    resp = session.request(method, url, headers=headers, stream=True,
                           hooks=bounded_http.hooks(), **kwargs)
    try:
        return Answer(resp.status_code,
                      bounded_http.read(resp, MAX_ANSWER, ANSWER_SECONDS))
    except bounded_http.BodyError as exc:
        raise requests.RequestException(str(exc)) from None
    finally:
        resp.close()


class AgentError(Exception):
    """A problem a retry will not fix: the message says what to change."""


class NotYet(Exception):
    """Ironic does not (yet) hand this machine a node: retried."""


def kernel_params(text):
    """`key=value` words of a kernel command line (bare words map to ''); the last one wins,
    as for the kernel itself."""
    params = {}
    for word in text.split():
        key, _, value = word.partition("=")
        if len(value) <= MAX_PARAM:
            params[key] = value
    return params


def ethernet_nics(sysfs="/sys/class/net"):
    """[(name, MAC)] of the machine's Ethernet NICs (virtual ones without a device are left
    out: a bridge or a bond does not name a port Ironic knows)."""
    nics = []
    for name in sorted(os.listdir(sysfs)):
        path = os.path.join(sysfs, name)
        try:
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() != "1":
                    continue
            if not os.path.exists(os.path.join(path, "device")):
                continue
            with open(os.path.join(path, "address")) as f:
                mac = f.read().strip().lower()
        except OSError:
            continue
        if mac and mac != "00:00:00:00:00:00":
            nics.append((name, mac))
    return nics


def mac_addresses(sysfs="/sys/class/net"):
    """MACs of the machine's Ethernet NICs, what the node is looked up by."""
    return [mac for _name, mac in ethernet_nics(sysfs)]


def source_address(api_url):
    """The address this machine sends from towards the API: the one the conductor, on the
    same network, can reach (no packet is sent: connect() on UDP only picks the route)."""
    parsed = urllib.parse.urlsplit(api_url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    family, _, _, _, sockaddr = socket.getaddrinfo(parsed.hostname, port,
                                                   type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect(sockaddr)
        return s.getsockname()[0]


def callback_url(address, ssh_port):
    # https: Ironic (39: [agent]require_tls on by default) refuses other schemes, and what
    # the URL leads to is encrypted and authenticated by the key in agent_verify_ca: SSH with
    # that host key pinned. Nothing speaks HTTP there.
    host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    return f"https://{host}:{ssh_port}"


def read_host_key(path):
    with open(path) as f:
        fields = f.read().split()
    if len(fields) < 2:
        raise AgentError(f"{path} is not an SSH public key")
    return f"{fields[0]} {fields[1]}"


class Agent:
    def __init__(self, api_url, macs, ssh_port=22, host_key=None, token=None, verify=True,
                 address=None, interval=60, session=None, binding_dir=DEFAULT_BINDING_DIR):
        self.api_url = api_url.rstrip("/")
        self.macs = macs
        self.ssh_port = ssh_port
        self.host_key = host_key
        self.token = token          # ipa-agent-token: pregenerated (virtual media boots)
        self.verify = verify
        self.address = address
        self.interval = interval
        self.session = session or requests.Session()
        self.binding_dir = binding_dir
        self.bound = None           # the node whose binding this agent wrote
        self.node = None

    def _request(self, method, path, **kwargs):
        try:
            return request(self.session, method, self.api_url + path, headers=HEADERS,
                                        timeout=30, verify=self.verify, **kwargs)
        except requests.RequestException as exc:
            raise NotYet(f"{method} {redact.url(self.api_url)}{path}: "
                         f"{type(exc).__name__}: {redact.text(str(exc))[:200]}") from None

    def lookup(self):
        """Our node's UUID, and the agent token unless it came on the command line."""
        resp = self._request("GET", "/v1/lookup",
                             params={"addresses": ",".join(self.macs)})
        if resp.status_code == 404:
            # Ironic answers the same for "no such MAC" and "not in a state that looks up".
            raise NotYet(f"no node with a port among {', '.join(self.macs)} is deploying")
        if resp.status_code >= 400:
            raise NotYet(f"lookup answered {resp.status_code}: {_reason(resp)}")
        try:
            body = resp.json()
            uuid = body["node"]["uuid"]
        except (ValueError, KeyError, TypeError):
            raise NotYet(f"lookup answered {resp.status_code} without a node record") from None
        token = (body.get("config") or {}).get("agent_token")
        if token and token != HIDDEN_TOKEN:
            self.token = token
        elif not self.token:
            # Ironic hands the token out once per deploy. Someone else looked up first: a
            # second ramdisk with our MAC, or this one before a restart of the agent.
            raise NotYet(f"node {uuid}: Ironic handed its agent token to an earlier lookup; "
                         "waiting for the next deploy to issue a new one")
        try:
            binding.write(self.binding_dir, uuid, self.token)
            if self.bound not in (None, uuid):
                # Re-enrolled as another node during this boot: the old node is not ours.
                os.unlink(binding.path(self.binding_dir, self.bound))
            self.bound = uuid
        except (OSError, ValueError) as exc:
            # Without it the conductor refuses this ramdisk: no use heartbeating.
            raise AgentError(f"cannot write the node binding in {self.binding_dir}: {exc}") \
                from None
        self.node = uuid
        LOG.info("Lookup: this machine is node %s", uuid)
        return uuid

    def heartbeat(self):
        address = self.address or source_address(self.api_url)
        body = {"callback_url": callback_url(address, self.ssh_port),
                "agent_token": self.token, "agent_version": _version()}
        if self.host_key:
            body["agent_verify_ca"] = self.host_key
        resp = self._request("POST", f"/v1/heartbeat/{self.node}", json=body)
        if resp.status_code in (200, 202, 204):
            LOG.info("Heartbeat for node %s accepted (ssh to %s port %s)", self.node,
                     address, self.ssh_port)
            return True
        if resp.status_code == 409:
            LOG.info("Heartbeat: node %s is busy, again shortly", self.node)
            return False
        # 400/404: a token from an earlier deploy, a node that moved on: look up again.
        LOG.warning("Heartbeat for node %s refused (%s: %s); looking the node up again",
                    self.node, resp.status_code, _reason(resp))
        self.node = None
        return False

    def run(self, stop=lambda: False, sleep=time.sleep):
        accepted_count = failures = 0
        while not stop():
            try:
                if self.node is None:
                    _retry_lookup(self, stop, sleep)
                    if self.node is None:
                        return
                accepted = self.heartbeat()
            except NotYet as exc:
                LOG.warning("%s", exc)
                accepted = False
            if accepted:
                accepted_count += 1
                failures = 0
                # Quick at first: a heartbeat that arrives while the conductor still runs
                # the deploy step is accepted by the API but too early to act on.
                pause = (STARTUP_PAUSES[accepted_count - 1]
                         if accepted_count <= len(STARTUP_PAUSES) else self.interval)
            else:
                failures += 1
                pause = min(2 ** failures, self.interval)
            # Jitter: a rack of machines booted at once should not heartbeat in lockstep.
            sleep(pause * random.uniform(0.8, 1.2))


def post_inventory(session, callback_url, inventory, verify=True, stop=lambda: False,
                   sleep=time.sleep, attempts=60):
    """POST {"inventory": ...} to Ironic's continue_inspection; the node's UUID it answers
    with, or None when Ironic never took it. Retried: the node may not be waiting yet."""
    from provision_agent.agent import inspection
    headers = {"X-OpenStack-Ironic-API-Version": inspection.API_VERSION}
    for attempt in range(1, attempts + 1):
        if stop():
            return None
        try:
            resp = request(session, "POST", callback_url, json={"inventory": inventory},
                                   headers=headers, timeout=60, verify=verify)
        except requests.RequestException as exc:
            LOG.warning("Inspection: posting the inventory to %s failed (%s); again shortly",
                        redact.url(callback_url), type(exc).__name__)
        else:
            if resp.status_code in (200, 201, 202):
                try:
                    body = resp.json() or {}
                    # 1.84 answers as lookup does ({"node": ...}); older, {"uuid": ...}
                    uuid = (body.get("node") or {}).get("uuid") or body.get("uuid")
                except (ValueError, AttributeError):
                    uuid = None
                LOG.info("Inspection: Ironic took the inventory (%d disks) for node %s",
                         len(inventory.get("disks") or []), uuid)
                return uuid or ""
            LOG.warning("Inspection: Ironic answered %s: %s; again shortly", resp.status_code,
                        _reason(resp))
            if resp.status_code in (400, 403):
                return None     # a refusal a retry will not change; the log says why
        sleep(min(5 * attempt, 30) * random.uniform(0.8, 1.2))
    return None


def _retry_lookup(agent, stop, sleep):
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(NotYet),
        wait=tenacity.wait_exponential(multiplier=1, min=2, max=10),
        stop=lambda _state: stop(), sleep=sleep, reraise=False,
        before_sleep=lambda state: LOG.info("Lookup: %s", state.outcome.exception()))
    try:
        retrying(agent.lookup)
    except tenacity.RetryError:
        pass


def _reason(resp):
    try:
        text = resp.json().get("error_message") or resp.text
    except ValueError:
        text = resp.text
    return redact.text(str(text))[:300]


def _version():
    try:
        from importlib.metadata import version
        return version("provision-agent")
    except Exception:   # an unpacked tree without metadata still heartbeats
        return "unknown"


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="provision-ironic-agent",
        description="Find this machine's node in Ironic (lookup by MAC) and heartbeat, so that "
                    "the conductor's provision deploy interface learns where to reach the "
                    "ramdisk over SSH and which host key to expect. Settings come from the "
                    "kernel command line (ipa-api-url, ipa-agent-token, ipa-insecure); the "
                    "options override them.")
    p.add_argument("--cmdline_file", default="/proc/cmdline",
                   help="Kernel command line to read (default %(default)s).")
    p.add_argument("--api_url", help="Ironic API URL (default: ipa-api-url).")
    p.add_argument("--mac", action="append", help="MAC address to look up by (repeatable; "
                   "default: every Ethernet NIC's).")
    p.add_argument("--address", help="Address to announce (default: the source address of "
                   "the route to the API).")
    p.add_argument("--ssh_port", type=int, default=22, help="sshd's port (default 22).")
    p.add_argument("--host_key_file", default=DEFAULT_HOST_KEY,
                   help="SSH host public key to report (default %(default)s).")
    p.add_argument("--binding_dir", default=DEFAULT_BINDING_DIR,
                   help="Where the node binding the conductor checks is written (root-only; "
                        "default %(default)s, the conductor's [provision_agent]binding_dir).")
    p.add_argument("--interval", type=float, default=60,
                   help="Seconds between heartbeats once settled (default 60; Ironic's "
                        "[api]ramdisk_heartbeat_timeout is 300).")
    p.add_argument("--debug", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        with open(args.cmdline_file) as f:
            params = kernel_params(f.read())
        api_url = args.api_url or params.get("ipa-api-url")
        callback = params.get("ipa-inspection-callback-url")
        if not api_url and not callback:
            raise AgentError("no Ironic API URL: ipa-api-url is not on the kernel command line "
                             "and --api_url was not given")
        for url in filter(None, (api_url, callback)):
            if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                raise AgentError(f"{redact.url(url)} is not an http(s) URL")
        macs = [m.lower() for m in args.mac] if args.mac else mac_addresses()
        if not macs:
            raise AgentError("no Ethernet NIC with a MAC address to look the node up by")
        host_key = read_host_key(args.host_key_file)
    except (AgentError, OSError) as exc:
        LOG.error("%s", exc)
        return 2
    insecure = params.get("ipa-insecure", "0").lower() in ("1", "true", "yes")
    if callback:
        from provision_agent.agent import inspection
        LOG.info("Inspection: posting this machine's inventory to %s", redact.url(callback))
        post_inventory(requests.Session(), callback,
                       inspection.collect(bootif=params.get("BOOTIF")), verify=not insecure)
        if not api_url:
            return 0
    agent = Agent(api_url, macs, ssh_port=args.ssh_port, host_key=host_key,
                  token=params.get("ipa-agent-token") or None, verify=not insecure,
                  address=args.address, interval=args.interval,
                  binding_dir=args.binding_dir)
    LOG.info("Looking up this machine in %s by %s", redact.url(api_url), ", ".join(macs))
    try:
        agent.run()
    except KeyboardInterrupt:
        return 0
    except AgentError as exc:
        LOG.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
