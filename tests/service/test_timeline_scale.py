"""The timeline with thousands of snapshots, in a real headless Chromium.

A workspace gets a month of history through the real library (:mod:`.history`: 2,000
snapshots in the normal run, 8,000 under the ``slow`` marker), and the dashboard must draw every
one of them, not only list them: each snapshot is a point of the chart's data, and the canvas
is painted where each point lies. It must stay usable: a click on a point opens that snapshot
(one far older than the table's first page, so its record is fetched on demand), zooming in to
a crowded stretch and clicking one of its dots opens that one, the table pages on, and a
snapshot taken with the CLI while the page is open appears in the picture and the table
without a reload. How long it takes is bench/service.py's business, never an assertion here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Service, needs_chromium, shoot, user_like_service
from .history import make_history

pytestmark = [needs_chromium]

#: the chart's snapshot lanes, their points and their pixel positions (relative to the chart)
POINTS_JS = """() => {
  const chart = echarts.getInstanceByDom(document.getElementById("chart"));
  if (!chart) return null;
  const out = [];
  for (const s of chart.getOption().series) {
    if (!String(s.id).startsWith("lane:")) continue;
    for (const v of s.data) {
      const [x, y] = chart.convertToPixel({ seriesId: s.id }, [v[0], v[1]]);
      out.push({ lane: v[1], time: v[0], index: v[2], x, y });
    }
  }
  return out;
}"""

#: how many of the given points have no painted pixel (alpha > 0, darker than the grid's
#: lines) within 1 px of their centre, on any of the chart's canvas layers
UNPAINTED_JS = """(points) => {
  const layers = [...document.querySelectorAll("#chart canvas")].map((c) => {
    const ratio = c.width / c.clientWidth;
    const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    return { ratio, w: c.width, data };
  });
  let missing = 0;
  for (const p of points) {
    let painted = false;
    for (const l of layers) {
      for (let dx = -1; dx <= 1 && !painted; dx++) for (let dy = -1; dy <= 1 && !painted; dy++) {
        const x = Math.round((p.x + dx) * l.ratio), y = Math.round((p.y + dy) * l.ratio);
        const k = (y * l.w + x) * 4;
        const [r, g, b, a] = [l.data[k], l.data[k + 1], l.data[k + 2], l.data[k + 3]];
        if (a > 0 && Math.min(r, g, b) < 200) painted = true;
      }
      if (painted) break;
    }
    if (!painted) missing++;
  }
  return missing;
}"""


@pytest.fixture(scope="module")
def history_svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with user_like_service(tmp_path_factory.mktemp("scale")) as s:
        yield s.start()


def _open(browser: Any, svc: Service, ws: str) -> Any:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(svc.ok("POST", "/v1/ui/login")["url"])
    page.goto(f"{svc.url}/#{ws}")
    page.wait_for_selector("#live.on")
    return page


def _click_point(page: Any, point: dict[str, Any]) -> None:
    box = page.locator("#chart").bounding_box()
    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])


def _check_timeline(browser: Any, svc: Service, root: Path, count: int,
                    shots: Path | None = None) -> None:
    ids = make_history(root, svc.home, count)
    ws = next(w["id"] for w in svc.ok("GET", "/v1/workspaces") if w["root"] == str(root))
    rows = svc.ok("GET", f"/v1/workspaces/{ws}/timeline")["rows"]
    assert [r[0] for r in rows] == ids  # every snapshot, oldest first
    page = _open(browser, svc, ws)
    # every snapshot is a point of the picture...
    page.wait_for_function(f"() => {{ const p = ({POINTS_JS})(); return p && p.length === "
                           f"{count}; }}", timeout=60_000)
    points = page.evaluate(POINTS_JS)
    assert sorted(p["index"] for p in points) == list(range(count))
    assert {p["lane"] for p in points} >= {"auto", "tool", "idle", "build", "git", "manual"}
    width = page.locator("#chart").bounding_box()["width"]
    assert all(0 <= p["x"] <= width for p in points)  # nothing off the axis
    # ...and is drawn: the canvas is painted at each one's place (once drawing has finished)
    page.wait_for_function(f"() => ({UNPAINTED_JS})(({POINTS_JS})()) === 0", timeout=60_000)
    # the table shows the newest page and says how many there are
    assert page.locator("#snap-table tbody tr").count() == 200
    assert page.locator("#snap-table tbody tr").first.get_attribute("data-id") == ids[-1]
    assert page.inner_text("[data-testid=snap-count]") == f"newest 200 of {count}"
    # a click on a point opens that snapshot: a labelled one a third of the way in
    by_index = {p["index"]: p for p in points}
    milestone = next(i for i in range(count // 3, count) if rows[i][3])
    _click_point(page, by_index[milestone])
    page.wait_for_selector(f"[data-testid=detail-title][data-id='{ids[milestone]}']")
    assert rows[milestone][3] in page.inner_text("[data-testid=snapshot-detail]")
    if shots is not None:
        shoot(page, shots, "dashboard-history")
    # zoomed in to a crowded stretch, a click on one of the dots opens that one
    target = next(i for i in range(count // 2, count) if rows[i][2] == "auto")
    t = rows[target][1]
    step = (rows[-1][1] - rows[0][1]) / count
    page.evaluate("([a, b]) => echarts.getInstanceByDom(document.getElementById('chart'))"
                  ".dispatchAction({type: 'dataZoom', startValue: a, endValue: b})",
                  [t - 3 * step, t + 3 * step])
    zoomed = next(p for p in page.evaluate(POINTS_JS) if p["index"] == target)
    assert 0 < zoomed["x"] < width
    _click_point(page, zoomed)
    page.wait_for_selector(f"[data-testid=detail-title][data-id='{ids[target]}']")
    # the table pages on: the next 200, older than the last one shown
    page.click("[data-testid=more-snaps]")
    page.wait_for_function("() => document.querySelectorAll('#snap-table tbody tr').length "
                           "=== 400")
    shown = page.eval_on_selector_all("#snap-table tbody tr", "rs => rs.map(r => r.dataset.id)")
    assert shown == ids[::-1][:400]
    # a snapshot taken outside the page (the CLI) arrives by the event stream, no reload
    page.evaluate("() => { window.__noReload = true; }")
    svc.ctrlz("snapshot", "-m", "from the terminal", cwd=root)
    page.wait_for_function(f"() => ({POINTS_JS})().length === {count + 1}", timeout=30_000)
    newest = svc.ok("GET", f"/v1/workspaces/{ws}/snapshots?limit=1")[0]
    assert newest["label"] == "from the terminal"
    page.wait_for_selector(f"#snap-table tbody tr[data-id='{newest['id']}']")
    assert page.locator("#snap-table tbody tr").first.get_attribute("data-id") == newest["id"]
    assert page.evaluate("() => window.__noReload") is True  # the same page, not reloaded
    assert not page.errors, page.errors
    page.close()


def test_timeline_with_thousands_of_snapshots(browser: Any, history_svc: Service,
                                              tmp_path: Path) -> None:
    _check_timeline(browser, history_svc, history_svc.base / "projects" / "webapp", 2000,
                    shots=tmp_path)


@pytest.mark.slow
def test_timeline_with_eight_thousand_snapshots(browser: Any, history_svc: Service) -> None:
    _check_timeline(browser, history_svc, history_svc.base / "projects" / "bigapp", 8000)
