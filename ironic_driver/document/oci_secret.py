"""Whose pull secret an oci:// resolution signs in with, and which hosts may see it.

The deploy's own secret (instance_info/image_pull_secret, set with the instance) is the
tenant's: it goes to whatever registry, and token realm, the tenant's image_source names.
Every other credential is the operator's: driver_info/image_pull_secret, Ironic's
[deploy]image_server_user/_password and the pre-shared tokens of [oci]authentication_config.
A tenant names image_source, and the registry answering there names the token realm in its
WWW-Authenticate header, so without a rule both are anyone's hosts: Ironic's client sends
`Basic USER:PASSWORD` to that realm, and a token a trusted realm made with the operator's
secret to the tenant's registry (and, as image_request_authorization_secret, to the ramdisk
that downloads from it).

The rule: the operator's credentials are used only for a registry that
[provision_agent]oci_secret_registries lists, and then an Authorization header goes only to
hosts it lists (the registry's token realm must be listed too). Any other registry is
signed in to without them, and an Authorization header goes to that registry alone (an
anonymous token its realm handed out; never a request to the realm with credentials). The
gate sits in the session every request of Ironic's client goes through (bounded_session),
so it holds whichever path of that client adds the header: auth=, a session header, a
redirect, a re-authentication.
"""

import urllib.parse

from oslo_config import cfg

from ironic_driver import ironic_compat

CONF = cfg.CONF
OPTION = "[provision_agent]oci_secret_registries"


def netloc(url):
    """(hostname, port or None) of a URL or an oci:// reference, lower case."""
    parts = urllib.parse.urlsplit(url if "//" in url else "//" + url)
    try:
        port = parts.port
    except ValueError:
        port = -1           # a port that is no number matches no entry that names one
    return (parts.hostname or "").lower(), port


def _matches(host, port, entry):
    entry = entry.strip().lower()
    if not entry:
        return False
    if entry.startswith("."):
        return host.endswith(entry)
    e_host, e_port = netloc(entry)
    return host == e_host and (e_port is None or port == e_port)


def listed(url, entries=None):
    """Whether the host of url is one the operator's credentials may go to."""
    entries = CONF.provision_agent.oci_secret_registries if entries is None else entries
    host, port = netloc(url)
    return bool(host) and any(_matches(host, port, e) for e in entries)


class Policy:
    """The credentials of one resolution and where an Authorization header may go."""

    def __init__(self, node, source):
        self.registry = netloc(source)
        self.tenants = bool((node.instance_info or {}).get("image_pull_secret"))
        if self.tenants:
            self.auth = ironic_compat.image_pull_auth(node)
            self.registry_listed = True     # not the question: the tenant's own secret
            self.operator_had = False
        else:
            operator = ironic_compat.image_pull_auth(node, permit_user_auth=False)
            self.operator_had = bool(operator or CONF.oci.authentication_config)
            self.registry_listed = listed(source)
            self.auth = operator if self.registry_listed else None
        self.withheld = set()      # hosts an Authorization header was kept from

    def may_authorize(self, url):
        """Whether a request to url may carry an Authorization header."""
        if self.tenants:
            return True
        if self.registry_listed:
            return listed(url)
        return netloc(url) == self.registry

    def gate(self, request):
        """Takes the Authorization header off a prepared request that may not carry it."""
        if "Authorization" in request.headers and not self.may_authorize(request.url):
            del request.headers["Authorization"]
            host, port = netloc(request.url)
            self.withheld.add(host + (f":{port}" if port else ""))

    def why_unauthorized(self, host, unauthorized):
        """What to say when a resolution failed (unauthorized: the registry wanted
        credentials) for credentials this policy did not give, or None when the usual
        explanation holds."""
        if self.tenants:
            return None
        if unauthorized and not self.registry_listed and self.operator_had:
            return (f"the registry wants credentials, and the node's pull secret "
                    f"(driver_info/image_pull_secret, [deploy]image_server_user, "
                    f"[oci]authentication_config) is only used for the registries in "
                    f"{OPTION}, which does not list {host}: set instance_info/"
                    f"image_pull_secret to this deploy's own, or list {host} (and its token "
                    f"realm) there if it is the operator's registry")
        if self.withheld:
            return (f"the pull secret was not sent to {', '.join(sorted(self.withheld))} "
                    f"(the registry's token realm or a redirect), which {OPTION} does not "
                    f"list: list it there if it belongs to the registry")
        return None
