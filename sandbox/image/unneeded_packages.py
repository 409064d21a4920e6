"""Prints the installed packages the sandbox image does not need, one per line, for build_rootfs.sh to
purge. Runs inside the new root (its own python3) and reads /var/lib/dpkg/status.

Kept: every required or essential package, the packages named on the command line, and everything they
depend on, except through the edges in SKIPPED_EDGES. Those pull in what only building software needs:
Debian's scipy depends on pythran (a Python-to-C++ compiler, for compiling extensions) and with it on
g++, boost and the Python and BLAS headers (about 450 MB); matplotlib depends on its Tk backend, which
can't open a window in a sandbox.
"""
import re
import sys

SKIPPED_EDGES = {
    ("python3-scipy", "python3-pythran"),
    ("python3-matplotlib", "python3-pil.imagetk"),
    ("python3-pil", "python3-pil.imagetk"),
}


def installed(path="/var/lib/dpkg/status"):
    """{package: fields} of every installed package."""
    packages = {}
    for block in open(path, encoding="utf-8").read().split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): ?(.*)$", block, re.M))
        if fields.get("Package") and "install ok installed" in fields.get("Status", ""):
            packages[fields["Package"]] = fields
    return packages


def names(field):
    """Dependency groups of a Depends-style field: [[alternative, ...], ...] without versions or archs."""
    groups = []
    for group in filter(None, (part.strip() for part in field.split(","))):
        groups.append([re.sub(r"\s*\(.*?\)|:\w+$", "", alt.strip()) for alt in group.split("|")])
    return groups


def unneeded(packages, roots):
    providers = {}
    for name, fields in packages.items():
        providers.setdefault(name, set()).add(name)
        for [provided, *_] in names(fields.get("Provides", "")):
            providers.setdefault(provided, set()).add(name)
    keep = set()
    todo = [p for p, f in packages.items() if f.get("Priority") == "required" or f.get("Essential") == "yes"]
    todo += [p for p in roots if p in packages]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        fields = packages[name]
        for group in names(fields.get("Pre-Depends", "")) + names(fields.get("Depends", "")):
            for alternative in group:
                for provider in providers.get(alternative, ()):
                    if (name, provider) not in SKIPPED_EDGES:
                        todo.append(provider)
    return sorted(set(packages) - keep)


if __name__ == "__main__":
    print("\n".join(unneeded(installed(), sys.argv[1:])))
