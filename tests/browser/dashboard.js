// dashboard.js URL OUT.json SHOT.png [WAIT_JS [TIMELINE.svg]]: open elrun's
// dashboard in Debian's chromium (headless, driven by playwright-core),
// wait until the page has drawn /api/job at least once and, when given,
// until the JavaScript condition WAIT_JS ("" for none) holds in the page
// (30 s at most), then write what the page shows, read from its DOM, to
// OUT.json, a full-page screenshot to SHOT.png and, when asked, the
// timeline as a standalone SVG file (its styles inlined).  Exit 0, or 1
// with one line saying what failed.  CHROMIUM: the browser's path
// [/usr/bin/chromium].
"use strict";
const { chromium } = require("playwright-core");

async function main() {
  const [url, out, shot, waitJs, svgOut] = process.argv.slice(2);
  if (!url || !out || !shot) throw new Error("usage: dashboard.js URL OUT.json SHOT.png [WAIT_JS]");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    // Root in CI has no user namespace sandbox; the page is our own.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const requests = [];
    page.on("request", (r) => requests.push(r.url()));
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url, { waitUntil: "load", timeout: 20000 });
    await page.waitForSelector("body[data-loaded='1']", { timeout: 20000 });
    if (waitJs) await page.waitForFunction(waitJs, null, { timeout: 30000, polling: 200 });
    const seen = await page.evaluate(() => {
      const txt = (id) => document.getElementById(id).textContent.trim();
      const rows = (id) => [...document.querySelectorAll("#" + id + " tbody tr")];
      return {
        conn: txt("conn"),
        run_id: txt("run-id"),
        state: txt("state"),
        round: txt("round"),
        nodes: txt("world-nodes"),
        workers: txt("world-workers"),
        restarts: txt("restarts"),
        step_rate: txt("step-rate"),
        loss: txt("loss"),
        members: rows("members").map((tr) => tr.dataset.id),
        worker_rows: rows("workers").map((tr) => [...tr.cells].map((c) => c.textContent)),
        events: [...document.querySelectorAll("#events li")].map((li) => ({ kind: li.dataset.kind, text: li.textContent })),
        marks: [...document.querySelectorAll("#timeline .mark")].map((g) => g.dataset.kind),
        points: [...document.querySelectorAll("#timeline circle.point")].map((c) => Number(c.dataset.nodes)),
        world_path: document.querySelector("#timeline path.world").getAttribute("d"),
        loss_points: document.getElementById("loss-section").hidden ? 0
          : document.querySelector("#loss-chart polyline").getAttribute("points").split(" ").length,
      };
    });
    seen.requests = requests;
    seen.page_errors = errors;
    await page.screenshot({ path: shot, fullPage: true });
    if (svgOut) {
      // The page's own SVG, with the style sheet's values written on each
      // element, so that the file looks the same anywhere.
      const svg = await page.evaluate(() => {
        const src = document.getElementById("timeline");
        const copy = src.cloneNode(true);
        const props = ["fill", "stroke", "stroke-width", "stroke-dasharray", "font-size", "font-family"];
        const a = [src, ...src.querySelectorAll("*")], b = [copy, ...copy.querySelectorAll("*")];
        a.forEach((e, i) => {
          const cs = getComputedStyle(e);
          b[i].setAttribute("style", props.map((p) => p + ":" + cs.getPropertyValue(p)).join(";"));
        });
        copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
        copy.setAttribute("width", "900");
        copy.setAttribute("height", "220");
        copy.style.background = "#fff";
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + copy.outerHTML + "\n";
      });
      require("fs").writeFileSync(svgOut, svg);
    }
    require("fs").writeFileSync(out, JSON.stringify(seen, null, 1) + "\n");
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error("dashboard.js: " + String(e.message || e).split("\n")[0]);
  process.exit(1);
});
