"""matplotlib in the sandbox, without importing it before user code does.

When user code first imports matplotlib, `MatplotlibFinder` seeds MPLCONFIGDIR from the font cache the
image was built with (so the first plot doesn't scan every font) and, once matplotlib has loaded, selects
codemode's backend (`codemode_runtime.mpl_backend`: Agg canvases, and a `plt.show()` that displays).
`FigureTracker` renders the figures pyplot holds open as PNG at `plt.show()` and at the end of each run,
then closes them.
"""
import importlib.machinery
import io
import os
import shutil
import sys
import tempfile
import weakref

BACKEND = "module://codemode_runtime.mpl_backend"
SEED_DIR = "/usr/share/codemode/mplconfig"
"""Where the data-science image keeps matplotlib's prebuilt font cache (sandbox/image/build_rootfs.sh)."""

_shown = weakref.WeakSet()
"""Figures rendered in this run; one unchanged since is not shown again at plt.show() or the run's end."""


class MatplotlibFinder:
    """A meta path finder that only acts on `import matplotlib`: it finds the real package and wraps its
    loading, so the backend is chosen before pyplot exists. Costs one string comparison per import."""

    def __init__(self):
        self._busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib" or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        finally:
            self._busy = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        seed_config_dir()
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            select_backend(module)

        spec.loader.exec_module = exec_module  # this spec's own loader instance; nothing else changes
        return spec


def install():
    """Puts the finder on sys.meta_path, once."""
    if not any(isinstance(finder, MatplotlibFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MatplotlibFinder())


def seed_config_dir(seed=SEED_DIR):
    """Points MPLCONFIGDIR at a writable directory and copies the prebuilt font cache into it."""
    target = os.environ.get("MPLCONFIGDIR")
    if not target:
        target = os.environ["MPLCONFIGDIR"] = os.path.join(tempfile.gettempdir(), "matplotlib")
    if not os.path.isdir(seed):
        return
    try:
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(seed):
            if not os.path.exists(os.path.join(target, name)):
                shutil.copyfile(os.path.join(seed, name), os.path.join(target, name))
    except OSError:  # a read-only or full /tmp: matplotlib builds its cache itself, as without a seed
        pass


def select_backend(matplotlib):
    """Makes codemode's backend the default, unless MPLBACKEND chose another."""
    if os.environ.get("MPLBACKEND"):
        return
    try:
        matplotlib.rcParams["backend"] = BACKEND
    except Exception:  # an unusual matplotlib: figures still render at the end of the run
        pass


def as_figure(obj):
    """`obj` when it is a matplotlib Figure (only if matplotlib is already imported), else None."""
    module = sys.modules.get("matplotlib.figure")
    figure = getattr(module, "Figure", None)
    return obj if figure is not None and isinstance(obj, figure) else None


def render(figure):
    """The figure as PNG bytes, at its own size and dpi (savefig rcParams apply)."""
    buffer = io.BytesIO()
    # zlib level 1 instead of pillow's 6 halves the time savefig takes (measured: 130 against 265 ms for a
    # plain line plot) for about 40% more bytes; what a model pays for an image depends on its pixels.
    figure.savefig(buffer, format="png", pil_kwargs={"compress_level": 1})
    # savefig itself marks the figure stale (it restores the colours and dpi it changed): what was just
    # rendered is current, and only a change after this should show it again.
    figure.stale = False
    _shown.add(figure)
    return buffer.getvalue()


class FigureTracker:
    """The figures pyplot holds open in one session."""

    def __init__(self, displayer):
        self._displayer = displayer

    def begin(self):
        """A new run: figures shown in earlier runs were closed, so nothing counts as shown."""
        _shown.clear()

    def open_figures(self):
        """Figures pyplot holds open, in the order they were created ([] when pyplot isn't imported)."""
        helpers = sys.modules.get("matplotlib._pylab_helpers")
        if helpers is None or "matplotlib.pyplot" not in sys.modules:
            return []
        return [manager.canvas.figure for manager in helpers.Gcf.get_all_fig_managers()]

    def show(self, render=True):
        """What plt.show() and the end of a run do: display every open figure not already shown
        unchanged, then close them all (even if rendering one failed; unshown when `render` is False)."""
        figures = self.open_figures()
        if not figures:
            return
        try:
            for figure in figures:
                if not render or (figure in _shown and not figure.stale):
                    continue
                self._displayer.display(figure)
        finally:
            sys.modules["matplotlib.pyplot"].close("all")
