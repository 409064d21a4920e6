"""codemode's matplotlib backend (`module://codemode_runtime.mpl_backend`): Agg canvases, and a
`plt.show()` that displays the open figures at that point and closes them, as Jupyter's inline backend
does. Imported by matplotlib itself, never before user code imports pyplot."""
from matplotlib.backend_bases import FigureManagerBase as FigureManager  # noqa: F401
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas  # noqa: F401

from . import context


def show(*args, **kwargs):
    """plt.show(): displays the open figures now (block= and other arguments change nothing here)."""
    context.current().display.figures.show()
