"""What people look at after a run: the HTML report (``--report``) and the MultiQC file (``--multiqc``).

Both are made from the run's summaries (:mod:`bpbc.summary`): one per reads
file, and with several files their total. The report is one HTML file that
needs no network: the plots are drawn by plotly.js, inlined from the plotly
package (docs/report.md says why plotly), and the figures it shows are
embedded as JSON (docs/json.md). The MultiQC file is MultiQC's custom content
(a ``*_mqc.json`` with one section, no plugin needed): per sample, the reads
by the patterns they pass for.
"""

from __future__ import annotations

import html
import json
import os
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from bpbc.io import STDIN, AtomicOutput, InputError
from bpbc.summary import Summary, used_bins

#: version of the report's embedded JSON (docs/json.md)
REPORT_FORMAT = 1
#: the patterns drawn one by one (by hits); the others are in the tables and in "all patterns"
TOP_PATTERNS = 5
#: bars of the per-pattern bar charts (by reads passing)
MAX_BARS = 30
#: patterns named in the MultiQC bar graph, per sample (the others: "other patterns")
MULTIQC_PATTERNS = 20
MULTIQC_ID = "bpbc"
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "displayModeBar": "hover"}


@dataclass(frozen=True)
class RunInfo:
    """What the report says of the run besides its summaries."""

    command_line: str
    version: str
    #: CPU threads the run could use
    threads: int
    started: str

    @classmethod
    def now(cls, command_line: str, threads: int) -> RunInfo:
        from bpbc import __version__

        return cls(command_line, __version__, threads, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))


def sample_name(summary: Summary) -> str:
    """The run's name in MultiQC and in the report: its reads file's stem (``{stem}``)."""
    from bpbc.distributed import stem  # no Dask in it

    return "stdin" if summary.reads_file == "<stdin>" else stem(summary.reads_file)


# ---------------------------------------------------------------- the figures' data


def reads_by_pattern(summary: Summary, named: int | None = None) -> dict[str, int]:
    """The reads by the patterns they pass for, a partition: '<pattern> only'
    for each pattern with reads that pass for it alone (the ``named`` with
    most such reads, the rest as 'other patterns'), 'several patterns' and
    'no pattern'."""
    statistics = summary.statistics
    assert statistics is not None
    sole = statistics.sole_pattern
    order = [p for p in np.argsort(-sole, kind="stable").tolist() if sole[p] > 0]
    shown = order if named is None else order[:named]
    parts = {f"{statistics.names[p]} only": int(sole[p]) for p in shown}
    if len(order) > len(shown):
        parts["other patterns"] = int(sole[order[len(shown):]].sum())
    parts["several patterns"] = statistics.several_patterns
    parts["no pattern"] = summary.reads - summary.reads_passing
    return parts


def _top_patterns(summary: Summary, count: int) -> list[int]:
    """The ``count`` patterns with most alignments (those with any)."""
    statistics = summary.statistics
    assert statistics is not None
    alignments = statistics.passing.sum(axis=(1, 2))
    return [p for p in np.argsort(-alignments, kind="stable")[:count].tolist() if alignments[p] > 0]


def _layout(title: str, x: str, y: str, **more) -> dict:
    return {"title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 14}},
            "xaxis": {"title": {"text": x}}, "yaxis": {"title": {"text": y}}, "margin": {"t": 60}, "height": 380,
            "legend": {"orientation": "h", "y": -0.25}, **more}


def _bars(name: str, labels: list[str], values: list[int]) -> dict:
    return {"type": "bar", "name": name, "x": labels, "y": values}


def _trace(name: str, x: list[int], y: list[int], bars: bool = False) -> dict:
    """A histogram's trace: bars, or a line in steps."""
    if bars:
        return {"type": "bar", "name": name, "x": x, "y": y, "opacity": 0.6}
    return {"type": "scatter", "mode": "lines", "name": name, "x": x, "y": y, "line": {"shape": "hvh"}}


def _histogram_traces(counts: np.ndarray, width: int, rows_by_name: dict[str, list[int]],
                      bars: bool = False) -> list[dict]:
    """A trace per name: the rows of ``counts`` of that name added up, over
    the bins' lower ends (bins of ``width``), up to the last bin used (bars:
    from the first bin used, so that reads of one length make a bar, not a
    line at the end of an empty axis)."""
    end = used_bins(counts)
    start = int(np.argmax(counts.any(axis=0))) if bars and end else 0
    x = (np.arange(start, end) * width).tolist()
    return [_trace(name, x, counts[rows, start:end].sum(axis=0).tolist(), bars)
            for name, rows in rows_by_name.items()]


def section_figures(summary: Summary, key: str) -> list[dict]:
    """The figures of one section (a reads file, or the total): plotly.js's
    data and layout, and the id of the div they are drawn in."""
    statistics = summary.statistics
    assert statistics is not None
    names, mates = statistics.names, statistics.mates
    figures = []

    parts = reads_by_pattern(summary, MAX_BARS)
    figures.append(("reads", [_bars("reads", list(parts), list(parts.values()))],
                    _layout("Reads by the patterns they pass for (a partition of the reads)", "", "reads")))

    totals = statistics.passing.sum(axis=(1, 2))
    shown = [p for p in np.argsort(-totals, kind="stable")[:MAX_BARS].tolist() if totals[p] > 0]
    labels = [names[p] for p in shown]
    traces = []
    for m in range(mates):
        for k, strand in enumerate(statistics.strands):
            label = f"strand {strand}" if mates == 1 else f"mate {m + 1}, strand {strand}"
            traces.append(_bars(label, labels, statistics.passing[shown, k, m].tolist()))
    more = "" if len(shown) in (0, len(names)) else f" ({len(shown)} with most of {len(names)})"
    figures.append(("passing", traces, _layout(f"Reads passing per pattern and strand{more}", "pattern", "reads",
                                               barmode="group")))

    top = _top_patterns(summary, TOP_PATTERNS)
    rows = {"all patterns": list(range(len(names) * mates))}
    if mates == 2:
        rows.update({f"all patterns, mate {m + 1}": list(range(m, len(names) * mates, mates)) for m in range(mates)})
    rows.update({names[p]: [p * mates + m for m in range(mates)] for p in top})
    for histogram, which, axis in ((statistics.hit_starts, "start", "start on the read (0-based)"),
                                   (statistics.hit_ends, "end", "end on the read (0-based, exclusive)")):
        bins = "" if histogram.width == 1 else f", bins of {histogram.width}"
        figures.append((f"hit_{which}s", _histogram_traces(histogram.counts, histogram.width, rows),
                        _layout(f"Where the hits {which} on the read{bins}", axis, "alignments")))

    # scores over each pattern's threshold: row p shifted left by its threshold
    margins = np.zeros_like(statistics.scores)
    for p, threshold in enumerate(statistics.thresholds):
        margins[p, :margins.shape[1] - threshold] = statistics.scores[p, threshold:]
    rows = {"all patterns": list(range(len(names))), **{names[p]: [p] for p in top}}
    figures.append(("scores", _histogram_traces(margins, 1, rows), _layout(
        "The hits' scores over their pattern's threshold (0: at the threshold)", "score - threshold", "alignments")))

    lengths = statistics.read_lengths
    mate_names = statistics.mate_labels()
    suffix = ", before trimming" if statistics.action == "trim" else ""
    traces = _histogram_traces(lengths.counts, lengths.width, {label + suffix: [m] for m, label in
                                                               enumerate(mate_names)}, bars=True)
    if statistics.action == "trim":
        trimmed = statistics.trimmed_lengths
        traces += _histogram_traces(trimmed.counts, trimmed.width, {f"{label}, after trimming": [m] for m, label
                                                                    in enumerate(mate_names)}, bars=True)
    width = max(lengths.width, statistics.trimmed_lengths.width)
    figures.append(("lengths", traces, _layout("Read lengths" + ("" if width == 1 else f", bins of {width}"),
                                               "length (bases)", "reads", barmode="overlay")))
    for name, data, layout in figures:
        if not any(any(trace["y"]) for trace in data):  # nothing to count: say so rather than draw empty axes
            text = "no reads" if name in ("reads", "lengths") else "no alignments"
            layout["annotations"] = [{"text": text, "showarrow": False, "font": {"size": 16},
                                      "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}]
            layout["xaxis"]["visible"] = layout["yaxis"]["visible"] = False
    return [{"div": f"{key}-{name}", "data": data, "layout": layout} for name, data, layout in figures]


def stage_figure(summary: Summary) -> dict:
    stages = {stage: round(seconds, 3) for stage, seconds in summary.stage_seconds.items() if seconds > 0}
    return {"div": "run-stages", "data": [{"type": "bar", "orientation": "h", "x": list(stages.values()),
                                           "y": list(stages), "name": "seconds"}],
            "layout": _layout("Seconds per stage (the stages overlap)", "seconds", "", height=300)}


# ---------------------------------------------------------------- the report


def report_data(run: RunInfo, sections: list[tuple[str, Summary]]) -> dict:
    """The report's embedded JSON (docs/json.md): the run, and per section
    (title, summary) the summary as ``--json`` writes it, the reads by
    pattern and the histograms."""
    return {
        "bpbc_report": REPORT_FORMAT,
        "run": {"command_line": run.command_line, "version": run.version, "started": run.started,
                "threads": run.threads},
        "sections": [{"title": title, "sample": sample_name(summary), "summary": summary.as_dict(),
                      "reads_by_pattern": reads_by_pattern(summary),
                      "histograms": summary.statistics.as_dict() if summary.statistics is not None else {}}
                     for title, summary in sections],
    }


def _table(rows: list[tuple[str, object]]) -> str:
    body = "".join(f"<tr><th>{html.escape(label)}</th><td>{_cell(value)}</td></tr>" for label, value in rows)
    return f'<table class="facts">{body}</table>'


def _cell(value) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return html.escape(str(value))


def _share(part: int, whole: int) -> str:
    return f"{part:,} ({100 * part / whole:.2f} %)" if whole else f"{part:,}"


def _counts_table(summary: Summary) -> str:
    rows: list[tuple[str, object]] = [("reads file", summary.reads_file)]
    if summary.paired:
        rows += [("mate 2 file", summary.reads2_file or ""), ("pairs screened", summary.pairs),
                 (f"pairs passing (pair filter {summary.pair_filter})", _share(summary.pairs_passing, summary.pairs))]
    rows += [("reads screened", summary.reads), ("reads passing", _share(summary.reads_passing, summary.reads)),
             ("reads not passing", _share(summary.reads - summary.reads_passing, summary.reads)),
             ("alignments (PAF lines)", summary.alignments)]
    if summary.action != "none":
        verb = "trimmed" if summary.action == "trim" else "masked"
        rows += [(f"reads {verb}", _share(summary.reads_trimmed, summary.reads)), (f"bases {verb}", summary.bases_trimmed),
                 (f"{'pairs' if summary.paired else 'reads'} dropped by --min-length", summary.too_short)]
    return _table(rows)


def _patterns_table(summary: Summary) -> str:
    columns = [(f"mate {mate}, {strand}", mate, strand) for mate in ("1", "2") for strand in summary.strands] \
        if summary.paired else [(f"reads passing, {strand}", None, strand) for strand in summary.strands]
    trimming = summary.action != "none"
    head = ["pattern", "length", "threshold"] + [label for label, _, _ in columns]
    if trimming:
        head += [f"reads {'trimmed' if summary.action == 'trim' else 'masked'}", "bases"]
    lines = ["<tr>" + "".join(f"<th>{html.escape(label)}</th>" for label in head) + "</tr>"]
    for pattern in summary.patterns:
        cells: list[object] = [pattern.name, pattern.length, pattern.threshold]
        for _, mate, strand in columns:
            cells.append(pattern.reads_passing[strand] if mate is None else (pattern.mates or {})[mate][strand])
        if trimming:
            cells += [pattern.trimmed_reads or 0, pattern.trimmed_bases or 0]
        lines.append("<tr>" + "".join(f"<td>{_cell(cell)}</td>" for cell in cells) + "</tr>")
    return f'<table class="patterns">{"".join(lines)}</table>'


def _run_table(run: RunInfo, summary: Summary) -> str:
    devices = summary.device if summary.devices == 1 else f"{summary.device} x {summary.devices}"
    rows: list[tuple[str, object]] = [
        ("command line", run.command_line), ("bpbc version", run.version), ("started", run.started),
        ("device", devices), ("CPU threads", run.threads), ("patterns file", summary.patterns_file),
        ("threshold", "per pattern" if summary.threshold is None else summary.threshold),
        ("scoring", ", ".join(f"{key} {value}" for key, value in summary.scoring.items())),
        ("strands", " ".join(summary.strands)), ("wall time (s)", summary.wall_time_s),
        ("reads per second", round(summary.reads_per_s))]
    return _table(rows)


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 0 1em 3em; color: #222; }
h1 { margin-top: 0.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
table.patterns td:not(:first-child), table.facts td { font-variant-numeric: tabular-nums; }
table.patterns { display: block; max-height: 24em; overflow: auto; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 0.5em; }
.plot { min-height: 380px; } code { white-space: pre-wrap; word-break: break-all; }
.note { color: #555; font-size: 0.9em; }
"""

_DRAW = """
(function () {
  var figures = JSON.parse(document.getElementById("bpbc-figures").textContent);
  var config = JSON.parse(document.getElementById("bpbc-plotly-config").textContent);
  figures.forEach(function (figure) {
    Plotly.newPlot(document.getElementById(figure.div), figure.data, figure.layout, config);
  });
})();
"""


def _json_script(element_id: str, value) -> str:
    # no "<" in a script element ("</script>" or "<!--" in a pattern's name would end or change it)
    text = json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def plotly_js() -> bytes:
    """plotly.js as the plotly package ships it (what ``plotly.offline.get_plotlyjs()``
    reads), found without importing plotly: its import took 80 ms, more than
    the rest of writing a report."""
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("--report needs the plotly package (pip install plotly)")
    for directory in spec.submodule_search_locations:
        path = os.path.join(directory, "package_data", "plotly.min.js")
        if os.path.isfile(path):
            with open(path, "rb") as script:
                return script.read()
    from plotly.offline import get_plotlyjs  # moved in some release: ask plotly itself

    return get_plotlyjs().encode()


def report_html(run: RunInfo, summaries: list[Summary], total: Summary | None = None) -> bytes:
    """The report (UTF-8): the run, then per reads file (with several, the
    total first) its counts, its patterns and its plots."""
    sections = ([("All reads files", total)] if total is not None else []) + [
        (summary.reads_file, summary) for summary in summaries]
    data = report_data(run, sections)
    first = total if total is not None else summaries[0]
    figures = [stage_figure(first)]
    parts = [f"<h1>bpbc-screen report</h1><p class=\"note\">bpbc {html.escape(run.version)}, {html.escape(run.started)}"
             " &middot; exact Smith-Waterman local alignment with affine gaps (not edit distance, not k-mers)</p>",
             "<h2 id=\"run\">The run</h2>", _run_table(run, first),
             '<div class="plots"><div class="plot" id="run-stages"></div></div>']
    if len(sections) > 1:
        links = "".join(f'<li><a href="#section-{i}">{html.escape(title)}</a></li>'
                        for i, (title, _) in enumerate(sections))
        parts.append(f"<ul>{links}</ul>")
    for index, (title, summary) in enumerate(sections):
        key = f"section-{index}"
        section_figures_ = section_figures(summary, key)
        figures += section_figures_
        plots = "".join(f'<div class="plot" id="{figure["div"]}"></div>' for figure in section_figures_)
        parts += [f'<h2 id="{key}">{html.escape(title)}</h2>', _counts_table(summary), "<h3>Patterns</h3>",
                  _patterns_table(summary), f'<div class="plots">{plots}</div>',
                  '<p class="note">Positions are on the read as given (PAF columns 3 and 4). Scores are the hits\' '
                  "exact scores; the screen computes no score below a pattern's threshold, so none is drawn.</p>"]
    head = "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>bpbc report: {html.escape(first.reads_file)}</title>", f"<style>{_STYLE}</style>", "<script>"])
    body = "\n".join([
        "</script>", "</head><body>", *parts, _json_script("bpbc-report-data", data),
        _json_script("bpbc-figures", figures), _json_script("bpbc-plotly-config", PLOTLY_CONFIG),
        f"<script>{_DRAW}</script>", "</body></html>", ""])
    return b"".join([head.encode(), plotly_js(), body.encode()])


# ---------------------------------------------------------------- MultiQC


def multiqc_data(summaries: list[Summary]) -> dict:
    """MultiQC custom content (a bar graph, one bar per reads file): the
    reads by the patterns they pass for (:func:`reads_by_pattern`)."""
    first = summaries[0]
    assert first.statistics is not None
    threshold = "per-pattern thresholds" if first.threshold is None else f"threshold {first.threshold}"
    return {
        "id": MULTIQC_ID,
        "section_name": "bpbc",
        "description": ("Reads screened by bpbc-screen (exact Smith-Waterman local alignment with affine gaps, "
                        f"{threshold}, patterns {html.escape(first.patterns_file)}): per sample, the reads that pass "
                        "for one pattern only (named), for several patterns, or for none."),
        "plot_type": "bargraph",
        "pconfig": {"id": "bpbc_reads_by_pattern", "title": "bpbc: reads by the patterns they pass for",
                    "ylab": "Reads", "cpswitch_counts_label": "Reads"},
        # the same order and colours in every run's file (MultiQC adds files of one id up): the panel's order
        "categories": {**{f"{name} only": {"name": f"{name} only"} for name in first.statistics.names},
                       "other patterns": {"name": "other patterns", "color": "#7f7f7f"},
                       "several patterns": {"name": "several patterns", "color": "#404040"},
                       "no pattern": {"name": "no pattern", "color": "#d9d9d9"}},
        "data": {sample_name(summary): reads_by_pattern(summary, MULTIQC_PATTERNS) for summary in summaries},
    }


# ---------------------------------------------------------------- the files


class ReportFiles:
    """The report and MultiQC outputs of a run: opened (so checked) before
    the run, written and committed after it (or discarded with it)."""

    def __init__(self, stack: ExitStack, report: str | None, multiqc: str | None):
        self.report = None if report is None else stack.enter_context(AtomicOutput(report, "HTML report"))
        self.multiqc = None if multiqc is None else stack.enter_context(AtomicOutput(multiqc, "MultiQC"))

    def write(self, run: RunInfo, summaries: list[Summary], total: Summary | None = None) -> None:
        if self.report is not None:
            self.report.open_binary().write(report_html(run, summaries, total))
            self.report.commit()
        if self.multiqc is not None:
            self.multiqc.open_binary().write((json.dumps(multiqc_data(summaries), indent=1) + "\n").encode())
            self.multiqc.commit()


@contextmanager
def report_files(report: str | None, multiqc: str | None):
    """:class:`ReportFiles` for a ``with`` block; a path that cannot be
    written raises InputError at once; a MultiQC file must be named
    ``*_mqc.json`` (or ``*_mqc.*``) for MultiQC to find it."""
    for path, option in ((report, "--report"), (multiqc, "--multiqc")):
        if path == STDIN:
            raise InputError(f"{option} needs a file name, not '-'")
    if multiqc is not None and not os.path.basename(multiqc).endswith("_mqc.json"):
        raise InputError(f"{multiqc}: --multiqc needs a name ending in _mqc.json (MultiQC finds its custom content "
                         "by that name)")
    with ExitStack() as stack:
        yield ReportFiles(stack, report, multiqc)
