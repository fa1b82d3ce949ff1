"""Topic labels files (topic_labels.py), the labels on the report and the site (opened in
headless Chromium: a user's label for one topic, the model's top words for another, shown as
text), and dates binned by their span (date_bins.py)."""

import csv
import os

import pytest
from click.testing import CliRunner

from bigtopics.cli import main
from bigtopics.date_bins import Date, DateRange, parse_date
from bigtopics.model import load_model
from bigtopics.options import OptionError
from bigtopics.topic_labels import read_labels

from .test_export_readers import chrome_driver

HOSTILE_LABEL = '<img src=x onerror="window.__pwned=1">'
MARKETS_LABEL = "Money & markets"


def test_labels_one_a_line_or_tsv(tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("money\n\ngrain & <b>crops</b>\n")
    assert read_labels(lines, 3) == {0: "money", 2: "grain & <b>crops</b>"}
    tsv = tmp_path / "labels.tsv"
    tsv.write_text("topic\tlabel\n2\toil\n0\tmoney\n")
    assert read_labels(tsv, 5) == {2: "oil", 0: "money"}


@pytest.mark.parametrize("text, says", [
    ("a\nb\n", "2 lines for 3 topics"),
    ("0\tx\n3\ty\n", "topic 3 is not one of the model's topics 0 to 2"),
    ("0\tx\n0\ty\n", "topic 0 is labelled twice"),
    ("zero\tx\n1\ty\n", "'zero' is not a topic number"),
    ("0\tx\nno tab\n", "line 2 has no TAB"),
])
def test_a_bad_labels_file_is_refused_in_one_line(tmp_path, text, says):
    path = tmp_path / "labels.txt"
    path.write_text(text)
    with pytest.raises(OptionError, match=says) as error:
        read_labels(path, 3)
    assert "\n" not in str(error.value) and str(path) in str(error.value)


def test_a_labels_path_that_is_no_file_is_never_read(tmp_path):
    fifo = tmp_path / "labels.fifo"
    os.mkfifo(fifo)
    with pytest.raises(OptionError, match="named pipe"):
        read_labels(fifo, 3)  # (a read would block forever)
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    with pytest.raises(OptionError, match="character device"):
        read_labels(zero, 3)
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(1 << 30)
    with pytest.raises(OptionError, match="bytes, more than labels"):
        read_labels(huge, 3)


def test_dates_are_read_in_the_forms_archives_write():
    assert parse_date("26-FEB-1987 15:01:01.79") == Date(1987, 2, 26, "day")
    assert parse_date(" 5-MAR-1987 08:45:34.42C G T M") == Date(1987, 3, 5, "day")
    assert (parse_date("1994-08-01").day, parse_date("1994-08").precision) == (1, "month")
    assert parse_date("March 5, 1987").day == 5
    assert parse_date(1987).precision == "year" and parse_date("circa 1850").year == 1850
    assert parse_date("31-FEB-1987") is None  # no such day
    assert parse_date("no date") is None and parse_date(float("nan")) is None


@pytest.mark.parametrize("dates, unit, width", [
    (["26-FEB-1987", "19-OCT-1987"], "month", 1),          # Reuters: by month
    (["1987-02-01", "1987-02-12"], "day", 1),
    (["1987-02-01", "1987-04-20"], "day", 7),              # 11 weeks
    (["1987-02-01", "1989-06-20"], "month", 2),            # 29 months
    (["1950-03-01", "1989-06-20"], "year", 2),
    (["1987-02-01", "1989"], "year", 1),                   # a year alone: by years
])
def test_dates_are_binned_by_the_span_they_cover(dates, unit, width):
    found = DateRange()
    for d in dates:
        found.add(parse_date(d))
    bins = found.bins()
    assert (bins.unit, bins.width) == (unit, width) and bins.count(found.last) <= 20


def test_dates_in_one_bin_are_not_charted():
    found = DateRange()
    for d in ("1987-02-01", "1987-02-01"):
        found.add(parse_date(d))
    assert found.bins() is None


# -- labels on the report and the site -------------------------------------------------------------
def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def labelled(demo_store, tmp_path_factory):
    """A run of the demo books, its document topics, a labels file naming topics 2 and 4, and
    the report and the site written with it."""
    root = tmp_path_factory.mktemp("labels")
    run, dt, labels, site = root / "run", root / "doc_topics.zarr", root / "labels.tsv", root / "site"
    labels.write_text(f"topic\tlabel\n2\t{HOSTILE_LABEL}\n4\t{MARKETS_LABEL}\n", encoding="utf-8")
    for args in (["train", demo_store, "-o", run, "-k", 6, "--epochs", 2, "--quiet"],
                 ["infer", run, demo_store, "-o", dt, "--quiet"],
                 ["report", run, "--doc-topics", dt, "--topic-labels", labels],
                 ["site", run, "--doc-topics", dt, "-o", site, "--topic-labels", labels, "--quiet"]):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
    model = load_model(run)
    expected = [" ".join(w for w, _ in model.top_words(k, 3)) for k in range(model.n_topics)]
    expected[2], expected[4] = HOSTILE_LABEL, MARKETS_LABEL
    return run, dt, labels, site, expected


@pytest.fixture(scope="module")
def driver():
    chrome = chrome_driver()  # (skips without chromium and chromedriver)
    yield chrome
    chrome.quit()


def page_state(driver, url: str, selector: str) -> list[str]:
    """The text of the elements matching selector once the page has made them, after checking
    that no label ran: no <img> made from it, nothing it would set."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(url)
    texts = WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "var t = Array.prototype.map.call(document.querySelectorAll(arguments[0]), function (e) {"
        " return e.textContent; }); return t.length ? t : null;", selector))
    assert driver.execute_script("return [document.images.length, typeof window.__pwned]") == [0, "undefined"]
    return texts


def assert_no_console_errors(driver):
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_the_report_shows_each_topic_with_its_label(labelled, driver):
    run, _, _, _, expected = labelled
    cells = page_state(driver, (run / "report.html").resolve().as_uri(), "#topics tbody tr td:first-child")
    assert cells == [f"{k} {label}" for k, label in enumerate(expected)]
    assert_no_console_errors(driver)


def test_the_site_shows_each_topic_with_its_label_on_every_page(labelled, driver):
    run, _, _, site, expected = labelled
    base = site.resolve().as_uri()
    cards = page_state(driver, f"{base}/index.html", "#topics .card h3")
    assert cards == [f"Topic {k}: {label}" for k, label in enumerate(expected)]
    # the topics a search finds, by a word of a user's label or of the top words
    found = page_state(driver, f"{base}/index.html#q=markets", "#topic-results li a")
    assert found == [f"topic 4: {MARKETS_LABEL}"]
    word = expected[0].split()[0]
    found = page_state(driver, f"{base}/index.html#q={word}", "#topic-results li a")
    assert f"topic 0: {expected[0]}" in found
    for k in (0, 2):
        assert page_state(driver, f"{base}/topic.html#k={k}", "h1") == [f"Topic {k}: {expected[k]}"]
        assert f"in topic {k}: {expected[k]}" in page_state(driver, f"{base}/topic.html#k={k}", "#chart")[0]
        assert driver.title == f"Topic {k}: {expected[k]}"
        book = driver.execute_script("return document.querySelector('#books a').getAttribute('href')")
        links = page_state(driver, f"{base}/{book}", "#topics a.topic")
        assert f"topic {k}: {expected[k]}" in links
        for link in links:
            shown = int(link.split(":")[0].split()[1])
            assert link == f"topic {shown}: {expected[shown]}"
        tips = driver.execute_script("return Array.prototype.map.call(document.querySelectorAll('.stack span'),"
                                     " function (e) { return e.getAttribute('title'); })")
        assert any(t.startswith(f"topic {k}: {expected[k]} (") for t in tips)
    assert_no_console_errors(driver)
    with open(site / "csv" / "topics.csv", newline="", encoding="utf-8") as f:
        assert [r["label"] for r in csv.DictReader(f)] == expected


@pytest.mark.parametrize("command", ["report", "site", "export"])
def test_every_command_refuses_a_bad_labels_file_alike_and_writes_nothing(labelled, tmp_path, command):
    run, dt, _, _, _ = labelled
    bad = tmp_path / "labels.txt"
    bad.write_text("one\ntwo\n")  # 2 lines for 6 topics
    out = tmp_path / "out"
    result = invoke(command, run, "--doc-topics", dt, "-o", out / "report.html" if command == "report" else out,
                    "--topic-labels", bad)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: --topic-labels {bad}: 2 lines for 6 topics (one label per line, topic 0 first; "
        "or TSV topic<TAB>label)"]
    assert not out.exists() and os.listdir(tmp_path) == ["labels.txt"]
