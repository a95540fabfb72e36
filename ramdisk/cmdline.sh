# Sourced by /init (installed as /usr/lib/provision/cmdline.sh). The kernel command line of a
# virtual-media boot carries Ironic's agent token (ipa-agent-token=...), and URLs on it may
# carry credentials; the console is readable by whoever watches the BMC. show_cmdline prints
# the line with the value of every parameter named like a secret and URLs' user info and
# query replaced, the rest as it is (sshkey= is a public key). sed, not a loop over the words:
# a loop would glob-expand them and lose quoted blanks.
show_cmdline() {
  printf '%s\n' "$1" | sed -E \
    -e 's/(^|[[:space:]])([^[:space:]=]*([Tt][Oo][Kk][Ee][Nn]|[Pp][Aa][Ss][Ss][Ww]|[Ss][Ee][Cc][Rr][Ee][Tt])[^[:space:]=]*)=("[^"]*"|[^[:space:]]*)/\1\2=<redacted>/g' \
    -e 's|([A-Za-z][A-Za-z0-9+.-]*://)[^/?#[:space:]"]*@|\1|g' \
    -e 's|(://[^[:space:]"?]*)[?][^[:space:]"]*|\1?<redacted>|g'
}
