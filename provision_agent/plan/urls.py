"""The host part of the URLs a document or a command line names (images, checksum files,
signatures, configdrives, key files, Tang servers, Ironic's API): an IPv6 literal is written
in brackets and must be one, an IPv4 literal must be one, a port is a number from 1 to 65535.

Checked before anything is fetched, so that a typo such as `http://[fd00::1:8080/x` or
`http://fd00::1/x` is refused at its place instead of failing later as a name that does not
resolve (or, in Python, as an error without a place). The messages name the host, never the
whole URL: its user info and query may be credentials. One pass over the text: linear.
"""

import ipaddress

# A URL's authority ends at the first of these (RFC 3986, 3.2)
_AUTHORITY_ENDS = "/?#"
_IPV4_CHARS = set("0123456789.")


def authority(url):
    """The host[:port] of scheme://[userinfo@]host[:port]/...; None when url has no '://'."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    end = min((i for i in (rest.find(c) for c in _AUTHORITY_ENDS) if i >= 0), default=len(rest))
    return rest[:end].rpartition("@")[2]


def _port_problem(port, host):
    if port == "":
        return None
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"the port after {host[:64]!r} is not a number from 1 to 65535"
    return None


def _ipv6_problem(literal):
    # RFC 6874: a zone id is written %25ZONE in a URL
    text = literal.replace("%25", "%", 1)
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        try:
            ipaddress.IPv4Address(literal)
        except ValueError:
            return f"[{literal[:64]}] is not an IPv6 address"
        return f"[{literal[:64]}] is an IPv4 address: only IPv6 addresses go in brackets"
    return None


def host_problem(url):
    """Why url's host and port cannot be right, or None (also for what has no '://')."""
    if not isinstance(url, str):
        return None
    host = authority(url)
    if host is None:
        return None
    if host.startswith("["):
        literal, close, after = host[1:].partition("]")
        if not close:
            return f"the IPv6 literal {host[:64]!r} has no closing ']'"
        if after and not after.startswith(":"):
            return f"{after[:32]!r} after the IPv6 literal [{literal[:64]}] is not ':PORT'"
        return _ipv6_problem(literal) or _port_problem(after[1:], f"[{literal}]")
    if "]" in host:
        return f"{host[:64]!r} has a ']' without its '['"
    if host.count(":") > 1:
        return (f"{host[:64]!r} looks like an IPv6 address: in a URL it goes in brackets, "
                "http://[fd00::1]:PORT/...")
    name, _, port = host.partition(":")
    if name and set(name) <= _IPV4_CHARS:
        try:
            ipaddress.IPv4Address(name)
        except ValueError:
            return f"{name[:64]!r} is not an IPv4 address"
    return _port_problem(port, name)


def address_problem(text):
    """Why text is neither an IP address (IPv6 without brackets) nor a host name, or None."""
    if not isinstance(text, str) or not text:
        return "it is empty"
    if text.startswith("[") or text.endswith("]"):
        return f"{text[:64]!r}: write an IPv6 address without brackets here"
    if ":" in text:
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            return f"{text[:64]!r} is not an IPv6 address"
        return None
    if set(text) <= _IPV4_CHARS:
        try:
            ipaddress.IPv4Address(text)
        except ValueError:
            return f"{text[:64]!r} is not an IPv4 address"
        return None
    labels = text.rstrip(".").split(".")
    if len(text) > 253 or not all(0 < len(label) <= 63 and label.replace("-", "").isalnum()
                                  and label.isascii() and label[0] != "-" and label[-1] != "-"
                                  for label in labels):
        return f"{text[:64]!r} is not an IP address or a host name"
    return None


def canonical_address(text):
    """An IP literal in its one spelling (lower case, zeros compressed: what OpenSSH writes
    into known_hosts and a heartbeat reports); a host name as it is."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text
