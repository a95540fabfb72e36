"""Read-back helpers run inside the guest over SSH; they return parsed data, not text to grep."""

import json
import shlex


class GuestQueries:
    """Mixed into VM; needs only self.ssh(command) -> Result."""

    def lsblk(self):
        """Block device tree as lsblk JSON (sizes in bytes), after udev has settled."""
        cols = ("NAME,KNAME,PATH,PKNAME,TYPE,SIZE,FSTYPE,LABEL,UUID,PARTTYPE,PARTLABEL,PARTUUID,"
                "MOUNTPOINT,SERIAL")
        self.ssh("udevadm settle --timeout=30", check=False)
        return json.loads(self.ssh(f"lsblk -J -b -o {cols}").stdout)["blockdevices"]

    def blkid(self):
        """{device: {TAG: value}} from blkid's export format (probed, not cached)."""
        out = self.ssh("blkid -c /dev/null -o export", check=False).stdout
        devices, current = {}, None
        for line in out.splitlines():
            if not line.strip():
                current = None
                continue
            key, _, value = line.partition("=")
            if key == "DEVNAME":
                current = devices.setdefault(value, {})
            elif current is not None:
                current[key] = value
        return devices

    def mdstat(self):
        return self.ssh("cat /proc/mdstat").stdout

    def mdadm_detail(self, device):
        return self.ssh(["mdadm", "--detail", device]).stdout

    def _lvm_report(self, command, fields):
        out = self.ssh(f"{command} --reportformat json --units b --nosuffix -o {fields}").stdout
        return json.loads(out)["report"][0][_lvm_key(command)]

    def lvs(self):
        return self._lvm_report("lvs", "lv_name,vg_name,lv_size,lv_attr,lv_path,segtype,devices")

    def vgs(self):
        return self._lvm_report("vgs", "vg_name,vg_size,vg_free,pv_count,lv_count")

    def pvs(self):
        return self._lvm_report("pvs", "pv_name,vg_name,pv_size,dev_size")

    def mounts(self):
        """[(source, target, fstype, options)] from /proc/mounts."""
        rows = []
        for line in self.ssh("cat /proc/mounts").stdout.splitlines():
            src, target, fstype, opts = line.split()[:4]
            rows.append((src, target.replace("\\040", " "), fstype, opts))
        return rows

    def read_text(self, path):
        return self.ssh(["cat", path]).stdout

    def sha256(self, path):
        return self.ssh(["sha256sum", path]).stdout.split()[0]

    def exists(self, path):
        return self.ssh(f"test -e {shlex.quote(path)}", check=False).returncode == 0


def _lvm_key(command):
    # lvs -> "lv", vgs -> "vg", pvs -> "pv": the key of the rows in lvm's JSON report
    return command[:2]
