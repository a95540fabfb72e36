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

# Whether Ironic booted this ramdisk: its boot interfaces put ipa-api-url (deploy, cleaning,
# rescue) or ipa-inspection-callback-url (in-band inspection) on the line. A pattern over the
# whole line, not a loop over its words; a word inside a quoted value counts too, which errs
# towards "Ironic" (and so towards ignoring sshkey=, below).
booted_by_ironic() {
  case " $1 " in
    *[[:space:]]ipa-api-url=*|*[[:space:]]ipa-inspection-callback-url=*) return 0 ;;
  esac
  return 1
}

# Appends the sshkey= words of command line $1 (base64 of an authorized_keys line each) to the
# file $2: keys given at boot by whoever boots the ramdisk by hand or in a test harness.
# Booted by Ironic, the line is not the operator's alone: Ironic puts the node's
# instance_info/kernel_append_params, which whoever deploys the node sets, on the deploy
# ramdisk's line too, and a key there would give a tenant root in the ramdisk that receives the
# node's document (pull secrets, key files, configdrive). The conductor's key is baked into the
# build then (build.sh --authorized-key); the deploy interface also refuses these words in
# instance_info, and this holds where it cannot look (a cleaning, an older conductor).
authorize_cmdline_keys() {
  if booted_by_ironic "$1"; then
    case " $1 " in
      *[[:space:]]sshkey=*) say "sshkey= ignored: booted by Ironic, whose kernel parameters" \
        "a tenant can set; the conductor's key must be built in (build.sh --authorized-key)" ;;
    esac
    return 0
  fi
  set -f    # the words are data: no file name expansion
  for word in $1; do
    case $word in
      sshkey=*) printf '%s\n' "${word#sshkey=}" | base64 -d >> "$2" && echo >> "$2" ;;
    esac
  done
  set +f
}
