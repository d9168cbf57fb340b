"""PNG plots of the benchmark tables (matplotlib, Agg backend): time vs size, log scales."""

from __future__ import annotations

from pathlib import Path

from . import say


def plot(rows: list[dict], x: str, path: Path, title: str, series=("method",), where=None) -> Path | None:
    """One line per distinct ``series`` tuple; rows without seconds are left out."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say(f"bench: matplotlib missing, plot {path.name} skipped (pip install matplotlib)")
        return None
    lines: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        if where and not where(row):
            continue
        try:
            point = (float(row[x]), float(row["seconds"]))
        except (KeyError, TypeError, ValueError):
            continue
        lines.setdefault(" ".join(str(row.get(key, "")) for key in series), []).append(point)
    if not lines:
        return None
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label, points in sorted(lines.items()):
        points.sort()
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel(x.replace("_", " "))
    axes.set_ylabel("seconds per call")
    axes.set_title(title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
