"""Issue 61: the frontier plot's legend covered both x-axis labels (a transfer report's many rows in
a fixed margin), and its faded swatches did not match panel (b)'s lines (drawn there at full
strength). Rendered from a real run's frontier (``tests/data/frontier_generic_tiny.json``: the
generic example, ``debug=tiny``, action router and selector; six rows added under the transfer
reports' names, copies of its real rows, for a transfer report's longer legend)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from conftest import ROOT

from mogg.run.budget.actions.policy import RouterFolds
from mogg.run.budget.selector.policy import Reading

_ATTRS = ("STYLES", "HEADLINE", "SHADED", "BANDS", "MARKS", "ceilings", "reads_units")


def _frontier() -> dict:
    fr = json.loads((ROOT / "tests" / "data" / "frontier_generic_tiny.json").read_text())
    fr["budgets"] = {int(b): row for b, row in fr["budgets"].items()}
    return fr


@pytest.fixture(scope="module")
def figure():
    import matplotlib.pyplot as plt

    from mogg.evaluation.frontier_render import frontier_figure

    fig = frontier_figure("mog", _frontier(), _policies())
    fig.savefig(io.BytesIO(), format="png")  # laid out and drawn as plot_frontier saves it (its DPI)
    yield fig
    plt.close(fig)


def test_the_legend_is_outside_both_panels_and_their_labels(figure):
    r = figure.canvas.get_renderer()
    legend, = figure.legends
    box = legend.get_window_extent(r)
    assert len(legend.get_texts()) >= 23  # a transfer report's length
    for ax in figure.axes:
        assert not box.overlaps(ax.get_tightbbox(r)), ax.get_title()  # tick and axis labels included
    fbox = figure.bbox
    # on the canvas, not cut off: measured at the saved DPI (four columns ran off both edges of the
    # 130-DPI image while fitting the 100-DPI canvas the test drew)
    assert fbox.x0 < box.x0 and box.x1 < fbox.x1 and fbox.y0 <= box.y0, (box, fbox)
    for text in legend.get_texts():
        t = text.get_window_extent(r)
        assert fbox.x0 <= t.x0 and t.x1 <= fbox.x1, text.get_text()


def test_every_swatch_matches_the_lines_it_names_in_both_panels(figure):
    a, b = figure.axes
    legend, = figure.legends
    handles = {t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles)}
    faded = [n for n in handles if n.endswith("(faded)")]
    assert faded
    b_lines = {line.get_color(): line for line in b.get_lines()}
    for n in faded:
        h = handles[n]
        line, = (x for x in a.get_lines() if x.get_label() == n)
        look = (h.get_color(), h.get_alpha(), h.get_linewidth(), h.get_linestyle())
        assert look == (line.get_color(), line.get_alpha(), line.get_linewidth(), line.get_linestyle()), n
        if line.get_color() in b_lines:  # the same row's gain in panel (b)
            gl = b_lines[line.get_color()]
            assert look == (gl.get_color(), gl.get_alpha(), gl.get_linewidth(), gl.get_linestyle()), n


def _policies() -> list:
    return [SimpleNamespace(**{a: getattr(cls, a) for a in _ATTRS}) for cls in (RouterFolds, Reading)]


@pytest.mark.parametrize("kinds", ["both", "actions"])
def test_the_saved_image_cuts_no_text_at_its_edges(tmp_path, kinds):
    """The PNG the report holds, read back: nothing drawn in its outermost columns and bottom rows.
    With the action router's policy alone (as the all-ladders plot is drawn) the selector's rows are
    faded, their labels longer: saved at 130 DPI from a figure laid out at 100, the legend's four
    columns ran off the image's right edge."""
    import matplotlib.image as mpimg

    from mogg.evaluation.frontier_render import plot_frontier

    plot_frontier("mog", _frontier(), tmp_path / "f.png", _policies()[:2 if kinds == "both" else 1])
    img = mpimg.imread(tmp_path / "f.png")[..., :3].min(axis=2)  # darkest channel per pixel, 1 = white
    assert img.shape[1] > 1000
    for edge, pixels in (("left", img[:, :3]), ("right", img[:, -3:]), ("bottom", img[-3:, :])):
        assert pixels.min() > 0.9, f"something drawn at the image's {edge} edge (cut off)"
