"""Draw the monitoring guide's picture of the Grafana dashboard from real data: a demo run scraped by Prometheus.

Grafana is in none of the registries this project reaches (not in Debian; PyPI and npm have clients and plugins,
not the server), so this draws each panel of ``monitoring/pycanal-dashboard.json`` itself, from the panel's own
title, queries, legends and unit:

1. starts Debian's ``prometheus`` server (scripts/setup.sh installs it) on a free loopback port, with a temporary
   data directory, scraping every second the two exporters of ``python -m canal.demo --metrics-port P
   --mirror-metrics-port Q``: the Spark source's reader process (capture and source series) and the driver that
   applies the mirror;
2. runs the demo (its reader SIGKILLed part-way, as always: the gap shows);
3. asks Prometheus for each panel's queries over the run (``query_range``, ``$destination`` as ``.*`` and
   ``$__rate_interval`` as ``5s``) and plots them with matplotlib, laid out as the dashboard's ``gridPos`` says.

Run: ``.venv/bin/python scripts/dashboard_png.py [--out docs/images/monitoring-dashboard.png] [--seconds 60]``. It
stops every process it started, by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "monitoring" / "pycanal-dashboard.json"
SCRAPE_S = 1
RATE_WINDOW = "5s"


def free_port() -> int:
    sys.path.insert(0, str(ROOT))
    from canal.testing.services import free_port as pick

    return pick()


def start_prometheus(work: Path, targets: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """Debian's prometheus scraping ``targets`` every second; the process and its URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("prometheus is missing: bash scripts/setup.sh installs Debian's prometheus package")
    port = free_port()
    config = work / "prometheus.yml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
                "scrape_configs": [{"job_name": "pycanal-demo", "static_configs": [{"targets": targets}]}],
            }
        )
    )
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(work / "prometheus.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.2)  # polling a server that starts: no event to wait on
    process.kill()
    raise SystemExit(f"prometheus did not start: {(work / 'prometheus.log').read_text()[-2000:]}")


def query_range(url: str, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": SCRAPE_S})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=30) as response:
        answer = json.load(response)
    if answer.get("status") != "success":
        raise SystemExit(f"{expr}: {answer}")
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def legend(template: str, labels: dict[str, str]) -> str:
    out = template
    for name, value in labels.items():
        out = out.replace("{{" + name + "}}", value)
    return out.replace("/tmp/", "").strip() or "value"


def draw(dashboard: dict[str, Any], url: str, start: float, end: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    fig = plt.figure(figsize=(16, height * 0.36), dpi=72)
    grid = fig.add_gridspec(height, 24, hspace=0.9, wspace=2.5, top=0.96, bottom=0.01, left=0.04, right=0.97)
    fig.suptitle(
        f"{dashboard['title']}: the dashboard's panels over a demo run scraped by Prometheus "
        "(scripts/dashboard_png.py)",
        fontsize=12,
    )
    answers = {  # every panel's series, asked for before drawing: the run's first sample starts every time axis
        (panel["id"], target["refId"]): query_range(
            url, target["expr"].replace("$destination", ".*").replace("$__rate_interval", RATE_WINDOW), start, end
        )
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    }
    first = min((float(s["values"][0][0]) for found in answers.values() for s in found if s["values"]), default=start)
    span = end - first
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        if panel["type"] == "row":
            ax = fig.add_subplot(grid[g["y"], :])
            ax.axis("off")
            ax.text(0, 0.5, panel["title"], fontsize=10, weight="bold", transform=ax.transAxes)
            continue
        ax = fig.add_subplot(grid[g["y"] + 1 : g["y"] + g["h"] - 1, g["x"] : g["x"] + g["w"]])
        ax.set_title(panel["title"], fontsize=9, loc="left")
        defaults = panel["fieldConfig"]["defaults"]
        right = {  # the targets a field override puts on a right axis (Grafana's custom.axisPlacement)
            o["matcher"]["options"]: next((p["value"] for p in o["properties"] if p["id"] == "unit"), "")
            for o in panel["fieldConfig"].get("overrides", [])
            if any(p["id"] == "custom.axisPlacement" and p["value"] == "right" for p in o["properties"])
        }
        twin = ax.twinx() if right else None
        lines: list[Any] = []
        for target in panel["targets"]:
            on = twin if twin is not None and target["refId"] in right else ax
            for series in answers[(panel["id"], target["refId"])]:
                times = [float(t) - first for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                label = legend(target["legendFormat"], series["metric"])
                color = f"C{len(lines) % 10}"
                if panel["type"] == "stat":
                    lines += on.step(times, values, where="post", label=label, color=color)
                    on.set_ylim(-0.1, 1.1)
                    on.set_yticks([0, 1], ["stopped", "running"])
                else:
                    lines += on.plot(times, values, label=label, linewidth=1.2, color=color)
        if defaults.get("unit") not in (None, "", "none", "short") and panel["type"] != "stat":
            ax.set_ylabel(defaults["unit"], fontsize=7)
        if twin is not None:
            twin.tick_params(labelsize=7)
            twin.set_ylabel(", ".join(sorted(set(right.values()))), fontsize=7)
        ax.set_xlim(0, span)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("s since the first sample", fontsize=7, labelpad=1)
        if lines:
            ax.legend(lines, [line.get_label() for line in lines], fontsize=6, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data in this run", ha="center", va="center", transform=ax.transAxes, fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    drawn = out.with_suffix(".full.png")
    fig.savefig(drawn, dpi=72)
    plt.close(fig)
    small(drawn, out)
    drawn.unlink()


def small(drawn: Path, out: Path) -> None:
    """``drawn`` saved to ``out`` with a palette of matplotlib's ten line colours and greys (a third of the bytes;
    every line keeps its colour)."""
    from matplotlib import colors
    from PIL import Image

    lines = [tuple(round(255 * c) for c in colors.to_rgb(f"C{i}")) for i in range(10)]
    greys = [(v, v, v) for v in range(0, 256, 8)] + [(255, 255, 255)]
    palette = Image.new("P", (1, 1))
    palette.putpalette([channel for rgb in lines + greys for channel in rgb])
    with Image.open(drawn) as image:
        image.convert("RGB").quantize(palette=palette, dither=Image.Dither.NONE).save(out, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "monitoring-dashboard.png")
    parser.add_argument("--seconds", type=float, default=60.0, help="the demo's workload duration")
    parser.add_argument("--preload", type=int, default=50_000, help="rows before the pipeline starts")
    args = parser.parse_args(argv)
    dashboard = json.loads(DASHBOARD.read_text())
    port, mirror_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="pycanal-dashboard-") as tmp:
        work = Path(tmp)
        prometheus, url = start_prometheus(work, [f"127.0.0.1:{port}", f"127.0.0.1:{mirror_port}"])
        try:
            start = time.time()
            demo = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "canal.demo",
                    "--seconds",
                    str(args.seconds),
                    "--preload",
                    str(args.preload),
                    "--metrics-port",
                    str(port),
                    "--mirror-metrics-port",
                    str(mirror_port),
                ],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
                check=False,
            )
            end = time.time()
            if demo.returncode != 0:
                print(f"the demo exited with {demo.returncode}", file=sys.stderr)
                return demo.returncode
            draw(dashboard, url, start, end, args.out)
        finally:
            prometheus.terminate()
            try:
                prometheus.wait(timeout=30)
            except subprocess.TimeoutExpired:
                prometheus.kill()
                prometheus.wait()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
