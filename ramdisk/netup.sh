# Sourced by /init (installed as /usr/lib/provision/netup.sh): addresses for the wired NICs,
# IPv4 and IPv6 at once, on every NIC at once, within one deadline.
#
#   IPv4  one `dhclient -1 -4` for every NIC, as before IPv6.
#   IPv6  the kernel's SLAAC (accept_ra=1) from router advertisements, and DHCPv6 as the RA
#         asks: its M flag (managed) starts `dhclient -6` (stateful: an address, a /128), its
#         O flag (other) `dhclient -6 -S` (stateless: DNS only). provision_agent/agent/ra.py
#         reads the flags the kernel keeps. A NIC that hears no RA within NET_RA_WAIT s gets
#         no DHCPv6 client: without an RA a host has no IPv6 route off its link.
#
# The wait ends when both families are done on every NIC (IPv4: dhclient bound a lease or
# gave up; IPv6: an RA-less NIC, or a global address, a DHCPv6 one where the RA asked for it),
# NET_GRACE s after one family is done with an address (an IPv6-only network must not wait
# out IPv4 DHCP, nor an IPv4-only one a DHCPv6 server that never answers), or at
# NET_DEADLINE s. The clients keep running after it: a lease that comes later is still taken.
#
# NET_NEED (4 or 6; /init sets it from the host of ipa-api-url, else of the inspection
# callback URL) is the one family the agent needs to reach Ironic: once it is done with an
# address, the wait ends without the other family's. In the lab the IPv4 lease came 1-2 s
# after the clients started and IPv6 (a second router solicitation, DHCPv6) 1-5 s later; an
# IPv6-only network waited NET_GRACE s more for IPv4. The other family goes on in the
# background as after the deadline, its DHCPv6 client started when its RA is heard.
NET_STATE=${NET_STATE:-/run/provision-net}    # each NIC's RA mode, the clients' logs
NET_NEED=${NET_NEED:-}
NET_DEADLINE=${NET_DEADLINE:-60}
NET_GRACE=${NET_GRACE:-10}
NET_RA_WAIT=${NET_RA_WAIT:-6}
# A RA without the M flag gives its SLAAC addresses within a second or two of its arrival
# (duplicate address detection); one that gives none by then had no prefix to take.
NET_SLAAC_WAIT=${NET_SLAAC_WAIT:-5}

# url_family URL: 4 or 6 when the URL's host is an IPv4 or an IPv6 literal; nothing for a name
# (DNS may answer with either family) or no URL.
url_family() {
  host=${1#*://}
  host=${host%%/*}
  case $host in
    \[*) echo 6; return ;;
  esac
  host=${host%:*}
  case $host in
    *[!0-9.]* | "") ;;
    *.*.*.*) echo 4 ;;
  esac
}

# Global addresses of NIC $1 and family $2 (4 or 6), blank-separated, CIDR form. An IPv6
# address still in duplicate address detection (tentative) does not count: the kernel does not
# use it as a source yet, and the agent, started once the wait is over, would announce the
# link-local address it routes by instead (the IPv6-only lab, 2026-11-29).
nic_addresses() {
  case $2 in
    6) usable=-tentative ;;
    *) usable="" ;;
  esac
  ip "-$2" -o addr show dev "$1" scope global $usable 2>/dev/null | awk '{print $4}' |
    paste -sd' '
}

# Whether NIC $1 has what its RA mode $2 promises: any global address, or for "managed" the
# /128 dhclient-script adds for the DHCPv6 lease.
v6_done() {
  case $2 in
    managed) case " $(nic_addresses "$1" 6) " in *"/128 "*) return 0 ;; esac; return 1 ;;
    *) [ -n "$(nic_addresses "$1" 6)" ] ;;
  esac
}

# network_up NIC...: starts the clients and waits as said above; leaves each NIC's RA mode in
# $NET_STATE/ra ("NIC MODE" lines) for network_report.
network_up() {
  network_start "$@"
  network_wait "$@"
}

# network_start NIC...: the clients started; network_wait NIC... (the same NICs) waits for
# them. /init assembles the multipath disks in between.
network_start() {
  mkdir -p /var/lib/dhcp "$NET_STATE"
  rm -f "$NET_STATE/nics"
  t0=$(date +%s)
  for n in "$@"; do
    echo 1 > "/proc/sys/net/ipv6/conf/$n/accept_ra" 2>/dev/null
    echo 1 > "/proc/sys/net/ipv6/conf/$n/autoconf" 2>/dev/null
  done
  timeout "$NET_DEADLINE" dhclient -1 -4 -pf /run/dhclient.pid "$@" \
    > "$NET_STATE/dhclient4.log" 2>&1 &
  v4=$!
  # in the background too: an IPv4 lease does not wait for the RAs
  rm -f "$NET_STATE/ra"
  { python3 -m provision_agent.agent.ra --wait "$NET_RA_WAIT" "$@" > "$NET_STATE/ra.part" \
      2>/dev/console && mv "$NET_STATE/ra.part" "$NET_STATE/ra"; } &
}

network_wait() {
  v4_done="" first="" t_ra="" needed=""
  while :; do
    now=$(date +%s)
    [ -n "$v4_done" ] || kill -0 "$v4" 2>/dev/null || v4_done=1
    if [ -z "$t_ra" ] && [ -f "$NET_STATE/ra" ]; then
      t_ra=$now
      dhcpv6_start
    fi
    v6_all="" got4="" got6=""
    [ -n "$t_ra" ] && v6_all=$(v6_verdict "$now")
    for n in "$@"; do
      [ -n "$(nic_addresses "$n" 4)" ] && got4=1
      [ -n "$(nic_addresses "$n" 6)" ] && got6=1
    done
    got=$got4$got6
    [ -n "$got" ] && [ -z "$first" ] && first=$now
    [ -n "$v4_done" ] && [ -n "$v6_all" ] && break
    # the family Ironic's URL needs is done with an address somewhere: the agent can go
    case $NET_NEED in
      4) [ -n "$v4_done" ] && [ -n "$got4" ] && needed="IPv4 is what Ironic's URL needs" ;;
      6) [ -n "$v6_all" ] && [ -n "$got6" ] && needed="IPv6 is what Ironic's URL needs" ;;
    esac
    [ -n "$needed" ] && break
    [ $((now - t0)) -ge "$NET_DEADLINE" ] && break
    # one family done and an address somewhere: the other has NET_GRACE s more
    if [ -n "$got" ] && { [ -n "$v4_done" ] || [ -n "$v6_all" ]; } &&
       [ $((now - first)) -ge "$NET_GRACE" ]; then
      break
    fi
    sleep 0.5
  done
  printf '%s\n' "$@" > "$NET_STATE/nics"
  if [ -n "$needed" ] && [ -z "$t_ra" ]; then
    # ended before the RAs were read: DHCPv6 starts when they are (ra.py ends by NET_RA_WAIT)
    dhcpv6_later &
  else
    [ -f "$NET_STATE/ra" ] || for n in "$@"; do echo "$n none"; done > "$NET_STATE/ra"
  fi
  v4_said=${v4_done:+done} v6_said=${v6_all:+done}
  say "network: waited $((now - t0)) s; IPv4 DHCP ${v4_said:-still trying};" \
      "IPv6 ${v6_said:-still waiting} (clients keep running)${needed:+; $needed}"
}

# DHCPv6 for the NICs whose RA asks for it, once ra.py has read the RAs (it gives up at
# NET_RA_WAIT s, with "none" for a NIC that heard none), or not at all after NET_DEADLINE s.
dhcpv6_later() {
  waited=0
  while [ ! -f "$NET_STATE/ra" ] && [ "$waited" -lt $((NET_DEADLINE * 2)) ]; do
    sleep 0.5
    waited=$((waited + 1))
  done
  [ -f "$NET_STATE/ra" ] && dhcpv6_start
}

# 1 when every NIC of $NET_STATE/ra has what its RA promises (at time $1), else nothing.
v6_verdict() {
  while read -r n mode; do
    case $mode in
      none) ;;
      slaac|other) v6_done "$n" "$mode" || [ $(($1 - t_ra)) -ge "$NET_SLAAC_WAIT" ] || return 0 ;;
      *) v6_done "$n" "$mode" || return 0 ;;
    esac
  done < "$NET_STATE/ra"
  echo 1
}

# A DHCPv6 client on each NIC of $NET_STATE/ra whose RA asks for one.
dhcpv6_start() {
  while read -r n mode; do
    case $mode in
      managed) flag="" ;;
      other) flag=-S ;;
      *) continue ;;
    esac
    # dhclient -6 flushes the NIC's permanent global IPv6 addresses when it starts: a static
    # one from network_data (a NIC that also has ipv4_dhcp) stays, with SLAAC beside it
    if [ -n "$(ip -6 -o addr show dev "$n" scope global permanent 2>/dev/null)" ]; then
      say "network: $n has a static IPv6 address: no DHCPv6 on it"
      continue
    fi
    # -nw: a daemon at once; it keeps asking after the deadline as a DHCP client does.
    dhclient -6 $flag -nw -pf "/run/dhclient6.$n.pid" -lf "/var/lib/dhcp/dhclient6.$n.leases" \
      "$n" >> "$NET_STATE/dhclient6.log" 2>&1 || say "dhclient -6 did not start on $n"
  done < "$NET_STATE/ra"
}

# network_report NIC...: one console line per NIC saying what it got, and on stdout the
# READY line's words: NIC=ADDRESS[,ADDRESS...] (IPv4 first), or NIC=none.
network_report() {
  words=""
  for n in "$@"; do
    v4=$(nic_addresses "$n" 4) v6=$(nic_addresses "$n" 6)
    mode=$(awk -v n="$n" '$1 == n {print $2}' "$NET_STATE/ra" 2>/dev/null)
    # a NIC the clients run on whose RA was not read yet (the wait ended on NET_NEED)
    [ -z "$mode" ] && grep -qx "$n" "$NET_STATE/nics" 2>/dev/null && mode=unread
    case $mode in
      managed) how="RA: DHCPv6 stateful" ;;
      other) how="RA: SLAAC, DHCPv6 stateless" ;;
      slaac) how="RA: SLAAC" ;;
      none) how="no router advertisement" ;;
      unread) how="router advertisements still being read" ;;
      *) how="configured from network_data" ;;
    esac
    say "network: $n: IPv4 ${v4:-none}; IPv6 ${v6:-none} ($how)"
    all=$(echo $v4 $v6 | tr ' ' ',')
    words="$words $n=${all:-none}"
  done
  echo "${words# }"
}
