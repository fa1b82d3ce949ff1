"""Text from a corpus (ids, titles, metadata, words) and from the user (a run folder's name) made
inert where it lands: in HTML, in JSON that a page runs, in a spreadsheet cell. Every page and
file a browser or a spreadsheet opens is written through these (docs/formats.md, "Hostile text").

  html_escape          HTML text or a quoted attribute value: & < > " ' as character references
  spreadsheet_cell     a CSV cell for people: text starting with = + - @ TAB or CR (what a
                       spreadsheet reads as a formula) gets a leading single quote (OWASP's advice)
  csv_text_field       spreadsheet_cell of a text, quoted as the csv module quotes it, for CSV
                       written by hand where csv.writer's per-field checks cost too much
  html_csv_cell        a CSV cell that a page inserts as HTML (dfr-browser's meta.csv): html_escape,
                       and a leading formula character as its character reference (`&#61;` for
                       `=`), which the page shows as the character and a spreadsheet as text;
                       html_csv_cells: a column of them, unchanged at the cost of one search
                       when none needs it
  script_json          JSON that stays one string inside <script> or a .js file: < > & and the
                       line separators U+2028 U+2029 as \\u escapes (the same value to a parser)
  inert_in_script      a string that another program embeds raw inside <script> (pyLDAvis's page
                       does: json.dumps of its data, unescaped): "</" and "<!" get U+200B (zero
                       width space) after the "<", so that no text can end the script element

Numbers are written as numbers and never changed: -3.5 is a value, not a formula.
"""

from __future__ import annotations

import html
import json
import re

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_SCRIPT_JSON = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_SCRIPT_END = re.compile(r"<(?=[/!])")
_CSV_QUOTE = re.compile('[,"\r\n]')
# a character html_escape replaces, or a formula character starting a value of a "\0"-joined column
_HTML_CSV_SPECIAL = re.compile("[&<>\"']|(?:^|\0)[=+\\-@\t\r]")


def html_escape(value) -> str:
    """str(value) as HTML text or the value of a quoted attribute."""
    return html.escape(str(value), quote=True)


def spreadsheet_cell(value):
    """A CSV cell for people: text a spreadsheet would run as a formula gets a leading "'";
    anything else (a number, other text) is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text_field(value) -> str:
    """spreadsheet_cell(str(value)) as one field of a CSV line, quoted as csv.writer quotes it."""
    text = spreadsheet_cell(str(value))
    return '"' + text.replace('"', '""') + '"' if _CSV_QUOTE.search(text) else text


def html_csv_cell(value):
    """A CSV cell a page inserts as HTML: html_escape of text, its first character as a numeric
    character reference if a spreadsheet would read a formula; a number unchanged."""
    if not isinstance(value, str):
        return value
    text = html_escape(value)
    return f"&#{ord(text[0])};{text[1:]}" if text.startswith(FORMULA_STARTS) else text


def html_csv_cells(values: list) -> list:
    """html_csv_cell of each value of a column (a list); the list itself when no value changes."""
    texts = [v for v in values if isinstance(v, str)]
    if not _HTML_CSV_SPECIAL.search("\0".join(texts)):
        return values
    return [html_csv_cell(v) for v in values]


def script_json(value, **dumps_options) -> str:
    """json.dumps(value) that no HTML parser can cut short: safe inline in <script>."""
    text = json.dumps(value, **dumps_options)
    for character, escaped in _SCRIPT_JSON:  # (str.replace finds nothing fast; translate looks up every character)
        text = text.replace(character, escaped)
    return text


def inert_in_script(text: str) -> str:
    """text that cannot end or comment out a <script> it is copied into raw (U+200B after a "<"
    that starts "</" or "<!"); other text unchanged."""
    return _SCRIPT_END.sub("<\u200b", text)
