"""Issue 61: the frontier plot's legend covered both x-axis labels (a transfer report's many rows in
a fixed margin), and its faded swatches did not match panel (b)'s lines (drawn there at full
strength). Rendered from a real run's frontier (``tests/data/frontier_generic_tiny.json``: the
generic example, ``debug=tiny``, action router and selector; six rows added under the transfer
reports' names, copies of its real rows, for a transfer report's longer legend)."""

from __future__ import annotations

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

    policies = [SimpleNamespace(**{a: getattr(cls, a) for a in _ATTRS}) for cls in (RouterFolds, Reading)]
    fig = frontier_figure("mog", _frontier(), policies)
    fig.canvas.draw()  # lays the figure out (constrained layout) as savefig does
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
    assert fbox.x0 <= box.x0 and box.x1 <= fbox.x1 and fbox.y0 <= box.y0  # on the canvas, not cut off


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


def test_the_plot_is_written(tmp_path):
    from mogg.evaluation.frontier_render import plot_frontier

    plot_frontier("mog", _frontier(), tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000
