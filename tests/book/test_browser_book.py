"""Open every page of the built book in a real browser (Debian's chromium, driven by Playwright).

Run by ``make test-book``, which builds the book first and sets VIEWLAB_BOOK_HTML; without that
variable these tests are skipped with a reason. The site is served on 127.0.0.1 and every request to
any other host is refused and reported, so a page that needs a CDN fails here, as it would offline.
Screenshots of two pages (one in dark mode) are saved under test-artifacts/.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import ROOT
from tools import colab_stamp, stamp

SITE = os.environ.get("VIEWLAB_BOOK_HTML")
ARTIFACTS = ROOT / "test-artifacts"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not SITE, reason="needs the built book: `make test-book` builds it and sets VIEWLAB_BOOK_HTML"),
]


def _is_redirect(path: Path) -> bool:
    return 'http-equiv="refresh"' in path.read_text(encoding="utf-8", errors="replace")[:2000].lower()


def _pages(site: Path) -> list[str]:
    """Every HTML page of the site except assets and redirect stubs (checked on their own)."""
    skip = ("_static/", "_sources/", "_images/", "_build/")
    return sorted(
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if not p.relative_to(site).as_posix().startswith(skip) and not _is_redirect(p)
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output readable
        pass


@pytest.fixture(scope="module")
def site() -> Path:
    path = (ROOT / SITE).resolve() if SITE else None
    assert path and (path / "index.html").is_file(), f"no built book at {path}; run `make book` first"
    return path


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser(chromium_args):
    executable = shutil.which("chromium")
    assert executable, "Debian's chromium is needed: apt-get install -y chromium (never `playwright install`)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=chromium_args)
        yield browser
        browser.close()


def _visit(browser, url: str, screenshot: Path | None = None, dark: bool = False) -> dict:
    context = browser.new_context(color_scheme="dark" if dark else "light", viewport={"width": 1280, "height": 900})
    page = context.new_page()
    report: dict = {"console": [], "foreign": [], "failed": []}

    def route(r):
        host = urlsplit(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            r.continue_()
        else:
            report["foreign"].append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: report["console"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: report["console"].append(f"uncaught: {e}"))
    page.on(
        "requestfailed", lambda r: report["failed"].append(r.url) if urlsplit(r.url).hostname in LOCAL_HOSTS else None
    )
    page.on("response", lambda r: report["failed"].append(f"{r.status} {r.url}") if r.status >= 400 else None)
    response = page.goto(url, wait_until="load")
    report["status"] = response.status if response else None
    # Every image, lazy or not, must arrive and decode.
    report["images"] = page.evaluate(
        """async () => {
            const imgs = Array.from(document.images);
            imgs.forEach(i => { i.loading = "eager"; });
            await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
            return imgs.map(i => ({src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0,
                                   alt: i.getAttribute("alt")}));
        }"""
    )
    if page.locator(".math").count():
        page.wait_for_function("() => document.querySelector('mjx-container') !== null", timeout=15000)
        report["math_rendered"] = page.locator("mjx-container").count()
    report["text"] = page.inner_text("main") if page.locator("main").count() else page.inner_text("body")
    report["theme"] = page.evaluate("document.documentElement.dataset.theme || ''")
    if screenshot:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=False)
    context.close()
    return report


def test_there_are_pages_to_check(site):
    pages = _pages(site)
    assert "book/intro.html" in pages and any(p.startswith("notebooks/") for p in pages), pages


def test_site_root_leads_to_the_intro(site, server, browser):
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server}/index.html")
    page.wait_for_url("**/book/intro.html", timeout=10000)
    assert "hands-on PyTorch tensor memory" in page.title()
    context.close()


def test_every_page_loads_cleanly_offline(site, server, browser):
    problems = []
    for name in _pages(site):
        report = _visit(browser, f"{server}/{name}")
        if report["status"] != 200:
            problems.append(f"{name}: HTTP {report['status']}")
        if report["console"]:
            problems.append(f"{name}: console errors {report['console']}")
        if report["foreign"]:
            problems.append(f"{name}: requests to other hosts {sorted(set(report['foreign']))}")
        if report["failed"]:
            problems.append(f"{name}: failed requests {sorted(set(report['failed']))}")
        broken = [i["src"] for i in report["images"] if not i["ok"]]
        if broken:
            problems.append(f"{name}: images that did not load {broken}")
        no_alt = [i["src"] for i in report["images"] if not (i["alt"] or "").strip() or i["alt"] == i["src"]]
        if no_alt:
            problems.append(f"{name}: images without alt text {no_alt}")
    assert not problems, "\n".join(problems)


def test_notebook_pages_show_verification_badge_and_rendered_math(site, server, browser):
    notebooks = [p for p in _pages(site) if p.startswith("notebooks/")]
    for name in notebooks:
        report = _visit(browser, f"{server}/{name}")
        assert "Verified with torch" in report["text"], f"{name}: no 'Verified with torch' line"
        assert any("colab-badge" in i["src"] for i in report["images"]), f"{name}: no Colab badge image"
    math_pages = [p for p in notebooks if 'class="math' in (site / p).read_text()]
    for name in math_pages:  # MathJax is served by the site itself, so formulas render offline
        assert _visit(browser, f"{server}/{name}").get("math_rendered", 0) > 0, f"{name}: math not rendered"


_CHROME = """() => {
    const shown = el => {
        const r = el.getBoundingClientRect(), s = getComputedStyle(el);
        return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none"
            && !el.closest("dialog:not([open])");
    };
    const header = document.querySelector("#pst-header");
    const box = header ? header.getBoundingClientRect() : {height: 0};
    const badge = [...document.querySelectorAll("a[href*='colab.research.google.com/github/'] img")]
        .find(i => !i.closest(".dropdown-launch-buttons"));  // the page's own badge, not the launch button's logo
    return {
        searches: [...document.querySelectorAll(".search-button__button, input[type=search]")].filter(shown)
            .map(e => e.className + " @" + Math.round(e.getBoundingClientRect().top)),
        header_height: box.height,
        header_text: header ? header.innerText.trim() : "",
        launch: [...document.querySelectorAll(".dropdown-launch-buttons a")].map(a => a.href),
        badge: badge ? {src: badge.currentSrc, ok: badge.naturalWidth > 0, href: badge.closest("a").href} : null,
    };
}"""


@pytest.mark.parametrize("width", [1280, 800, 375])
def test_no_empty_header_band_one_search_control_and_the_launch_links(site, server, browser, width):
    """The theme's top navbar used to be an empty 64 px band holding only a second "Search Ctrl+K" field. Now: no
    band (or one with content), exactly one visible search control at desktop, tablet and phone width (the
    sidebar's field, or the article header's icon where the sidebar is folded away), and a notebook page keeps
    its launch buttons (Colab, Binder) and its Colab badge, the book's own image."""
    notebook = next(p for p in _pages(site) if p.startswith("notebooks/"))
    for name in ("book/intro.html", "book/explorer.html", notebook):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto(f"{server}/{name}", wait_until="load")
        page.wait_for_timeout(300)  # the theme's scripts settle the sidebars after load
        chrome = page.evaluate(_CHROME)
        if width == 1280:
            page.screenshot(path=str(ARTIFACTS / f"book-top-{Path(name).stem}.png"))
        context.close()
        where = f"{name} at {width} px"
        assert chrome["header_height"] == 0 or chrome["header_text"], f"{where}: an empty header band {chrome}"
        assert len(chrome["searches"]) == 1, f"{where}: visible search controls {chrome['searches']}"
        if name != notebook:
            continue
        colab = colab_stamp.colab_url(colab_stamp.repository_url(), Path(notebook).stem + ".ipynb")
        assert colab in chrome["launch"], f"{where}: launch links {chrome['launch']}"
        binder = f"https://mybinder.org/v2/gh/{'/'.join(stamp.owner_name(colab_stamp.repository_url()))}/main"
        assert any(u.startswith(binder) for u in chrome["launch"]), f"{where}: launch links {chrome['launch']}"
        badge = chrome["badge"]
        assert badge and badge["ok"] and badge["href"] == colab, f"{where}: Colab badge {badge}"
        assert badge["src"].startswith(server) and badge["src"].endswith("colab-badge.svg"), badge


def test_screenshots_of_two_pages(site, server, browser):
    first_notebook = next(p for p in _pages(site) if p.startswith("notebooks/"))
    shots = {
        ARTIFACTS / "book-intro.png": ("book/intro.html", False),
        ARTIFACTS / f"book-{Path(first_notebook).stem}-dark.png": (first_notebook, True),
    }
    for path, (name, dark) in shots.items():
        report = _visit(browser, f"{server}/{name}", screenshot=path, dark=dark)
        assert path.stat().st_size > 10_000, f"{path} looks empty"
        if dark:
            assert report["theme"] == "dark", "the theme did not follow the browser's dark colour scheme"
