"""Partition type codes for each table kind (facts from the GPT and MBR type registries)."""

GPT_TYPES = {
    "bios_grub": "21686148-6449-6E6F-744E-656564454649",
    "esp": "C12A7328-F81F-11D2-BA4B-00A0C93EC93B",
    "raid": "A19D880F-05FC-4D3B-A006-743F0F84911E",
    "lvm": "E6D6D379-F507-44C2-A23C-238F2A3DF928",
    "swap": "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F",
    "linux": "0FC63DAF-8483-4772-8E79-3D69D8477DE4",
}

MBR_TYPES = {
    "esp": "0xef",
    "raid": "0xfd",
    "lvm": "0x8e",
    "swap": "0x82",
    "linux": "0x83",
    "custom": "0x83",
    "extended": "0x0f",
}


def type_code(table, ptype, type_guid=None):
    if table == "gpt":
        return (type_guid or GPT_TYPES[ptype]).upper()
    return MBR_TYPES[ptype]


def flags(table, ptype, explicit):
    """The flags to set: the explicit ones, plus what msdos needs for the type to mean it."""
    result = list(explicit)
    if table == "msdos" and ptype == "esp" and "boot" not in result:
        result.append("boot")
    return result
