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
  agent_status     "end" in the first heartbeat after the conductor's job exited here, sent
                   as soon as it did (job_watch.py): the conductor looks at once instead of
                   at its next look. Absent otherwise.

After each lookup it writes the binding file (provision_agent/binding.py) that the conductor
reads over SSH before it sends anything: the heartbeat says where a ramdisk is, the binding
proves which node's lookup that ramdisk won.

With `ipa-inspection-callback-url` on the command line (Ironic's `agent` inspect interface) it
first posts the machine's inventory there (inspection.py), as ironic-python-agent does.

Provision itself is not run from here: the conductor runs it over SSH. The token and the
URL's credentials never reach a log line.
"""

import ipaddress
import logging
import os
import random
import sys
import time
import urllib.parse

import requests
import tenacity

from provision_agent import binding, redact
from provision_agent.agent.api import HEADERS, HIDDEN_TOKEN, AgentError, NotYet, reason, request
from provision_agent.agent.host import (
    callback_url,
    kernel_params,
    mac_addresses,
    read_host_key,
    source_address,
)
from provision_agent.agent.job_watch import DEFAULT_JOB_DIR, ExitWatch
from provision_agent.agent.startup import DEFAULT_BINDING_DIR, after_network, parse_args
from provision_agent.plan import urls

LOG = logging.getLogger("provision-ironic-agent")

STARTUP_PAUSES = (3, 10, 30)
# How often a pause between heartbeats checks whether the job exited (a stat of one file).
WATCH_EVERY = 1.0


class Agent:
    def __init__(self, api_url, macs, ssh_port=22, host_key=None, token=None, verify=True,
                 address=None, interval=60, session=None, binding_dir=DEFAULT_BINDING_DIR,
                 job_dir=DEFAULT_JOB_DIR):
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
        self.watch = ExitWatch(job_dir)
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
            raise NotYet(f"lookup answered {resp.status_code}: {reason(resp)}")
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

    def heartbeat(self, status=None):
        """status: Ironic's agent_status; "end" once the conductor's job exited here."""
        address = self.address or source_address(self.api_url)
        if ipaddress.ip_address(address).is_link_local:
            # Ironic refuses it (the conductor fails the deploy); a DHCPv6 or SLAAC address
            # still in duplicate address detection is not yet a source the kernel picks
            raise NotYet(f"the route to Ironic leaves from the link-local address {address}: "
                         "no usable global address yet; the heartbeat waits for one")
        body = {"callback_url": callback_url(address, self.ssh_port),
                "agent_token": self.token, "agent_version": agent_version()}
        if status:
            body["agent_status"] = status
        if self.host_key:
            body["agent_verify_ca"] = self.host_key
        resp = self._request("POST", f"/v1/heartbeat/{self.node}", json=body)
        if resp.status_code in (200, 202, 204):
            LOG.info("Heartbeat for node %s accepted (ssh to %s port %s)%s", self.node,
                     address, self.ssh_port, "; it said the job exited" if status else "")
            return True
        if resp.status_code == 409:
            LOG.info("Heartbeat: node %s is busy, again shortly", self.node)
            return False
        # 400/404: a token from an earlier deploy, a node that moved on: look up again.
        LOG.warning("Heartbeat for node %s refused (%s: %s); looking the node up again",
                    self.node, resp.status_code, reason(resp))
        self.node = None
        return False

    def run(self, stop=lambda: False, sleep=time.sleep):
        accepted_count = failures = 0
        while not stop():
            ended = None
            try:
                if self.node is None:
                    _retry_lookup(self, stop, sleep)
                    if self.node is None:
                        return
                ended = self.watch.pending(self.node)
                accepted = self.heartbeat("end" if ended else None)
                if accepted and ended:
                    self.watch.reported = ended
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
            self._pause(pause * random.uniform(0.8, 1.2), stop, sleep,
                        before=None if accepted else ended)

    def _pause(self, seconds, stop, sleep, before=None):
        """Sleeps seconds, or less when the job exits meanwhile: that heartbeat goes at once.
        before: an exit a refused heartbeat said: it waits the pause out (no other does)."""
        left = seconds
        while left > 0 and not stop():
            step = min(WATCH_EVERY, left)
            sleep(step)
            left -= step
            if self.watch.pending(self.node) not in (None, before):
                return


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


def _check_url(name, url):
    """An http(s) URL whose host is well-formed (an IPv6 literal in brackets, an IPv4 literal
    that is one); AgentError naming the parameter otherwise. Python's own parse says
    "Invalid IPv6 URL" without saying where, or takes `http://fd00::1:6385` for host fd00."""
    problem = urls.host_problem(url)
    if problem:
        raise AgentError(f"{name}: {problem}")
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise AgentError(f"{name}: {redact.url(url)} is not an http(s) URL")


def agent_version(update_root=None):
    """The heartbeat's agent_version: provision's version and the protocol of the commands
    the conductor's key is forced into (ramdisk_commands.py), which the conductor checks.
    After an update in place (update.py), the updated code's: this agent keeps running the
    code it started with (restarting it would lose the agent token Ironic hands out once)."""
    from provision_agent.agent import ramdisk_commands, update
    current = update.current_answer(update_root or update.ROOT)
    if current:
        return f"{current['provision']} protocol={current['protocol']}"
    return f"{_version()} protocol={ramdisk_commands.PROTOCOL}"


def _version():
    try:
        from importlib.metadata import version
        return version("provision-agent")
    except Exception:   # an unpacked tree without metadata still heartbeats
        return "unknown"


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    after_network(args.after, args.after_seconds)
    try:
        with open(args.cmdline_file) as f:
            params = kernel_params(f.read())
        api_url = args.api_url or params.get("ipa-api-url")
        callback = params.get("ipa-inspection-callback-url")
        if not api_url and not callback:
            raise AgentError("no Ironic API URL: ipa-api-url is not on the kernel command line "
                             "and --api_url was not given")
        for name, url in (("ipa-api-url", api_url), ("ipa-inspection-callback-url", callback)):
            if url:
                _check_url(name, url)
        macs = [m.lower() for m in args.mac] if args.mac else mac_addresses()
        if not macs:
            raise AgentError("no Ethernet NIC with a MAC address to look the node up by")
        host_key = read_host_key(args.host_key_file)
    except (AgentError, OSError) as exc:
        LOG.error("%s", exc)
        return 2
    insecure = params.get("ipa-insecure", "0").lower() in ("1", "true", "yes")
    token = params.get("ipa-agent-token") or None
    if callback:
        from provision_agent.agent import inspection
        LOG.info("Inspection: posting this machine's inventory to %s", redact.url(callback))
        taken = inspection.post_inventory(requests.Session(), callback,
                       inspection.collect(bootif=params.get("BOOTIF")), verify=not insecure)
        if not api_url:
            return 0
        # Fast track (Ironic adds ipa-api-url): the token came with Ironic's answer, and the
        # lookup that follows gets it hidden, as ironic-python-agent's does.
        token = token or (taken.token if taken else None)
    agent = Agent(api_url, macs, ssh_port=args.ssh_port, host_key=host_key,
                  token=token, verify=not insecure,
                  address=args.address, interval=args.interval,
                  binding_dir=args.binding_dir, job_dir=args.job_dir)
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
