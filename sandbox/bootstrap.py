"""codemode sandbox bootstrap, run as `python3 -I -c <this source>`.

Reads one JSON line from stdin, {modules, packages, main, config}, imports those modules from memory
(nothing touches the disk) and hands over to `main.main(config, rest)`, where `rest` is whatever stdin
bytes arrived after that line.
"""
import importlib, importlib.machinery, json, os, sys


class MemoryImporter:
    """Meta path finder and loader for modules held in a dict; first on sys.meta_path so it wins."""

    def __init__(self, modules, packages):
        self.modules, self.packages = modules, set(packages)

    def find_spec(self, name, path=None, target=None):
        if name not in self.modules:
            return None
        is_package = name in self.packages
        spec = importlib.machinery.ModuleSpec(name, self, origin=self.filename(name), is_package=is_package)
        return spec

    def filename(self, name):
        suffix = "/__init__.py" if name in self.packages else ".py"
        return "<codemode>/" + name.replace(".", "/") + suffix

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__spec__.name
        module.__file__ = self.filename(name)
        exec(compile(self.modules[name], module.__file__, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, name):
        return self.modules.get(name)


def install(modules, packages):
    """Puts an importer for `modules` first on sys.meta_path and returns it."""
    importer = MemoryImporter(modules, packages)
    sys.meta_path.insert(0, importer)
    return importer


def read_first_line(fd=0):
    """Reads up to the first newline with raw reads, so no later frame is swallowed by a buffer."""
    buffer = bytearray()
    while b"\n" not in buffer:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise SystemExit("codemode bootstrap: stdin closed before the bootstrap frame arrived")
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    return line, rest


if __name__ == "__main__":
    line, rest = read_first_line()
    frame = json.loads(line)
    install(frame["modules"], frame["packages"])
    importlib.import_module(frame["main"]).main(frame["config"], rest)
