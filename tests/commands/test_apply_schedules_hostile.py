"""Hostile schedules files at `apply_schedules`: aliases, echo of the file, oversized numbers (issue 22)."""
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from scheduler.models import Schedule

pytestmark = pytest.mark.django_db

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""

SHADOW = "root:$6$SeCrEtSaLt$AbCdEfGhIjKlMnOpQrStUvWxYz0123456789:19000:0:99999:7:::\n" \
         "daemon:*:19000:0:99999:7:::\n"


def run(path, *args) -> tuple[str, str, CommandError | None]:
    out, err = StringIO(), StringIO()
    try:
        call_command("apply_schedules", str(path), *args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


def test_a_billion_laughs_file_is_refused_before_the_document_is_built(tmp_path, monkeypatch):
    path = tmp_path / "laughs.yaml"
    path.write_text(BILLION_LAUGHS)
    built = []
    real = yaml.constructor.SafeConstructor.construct_document
    monkeypatch.setattr(yaml.constructor.SafeConstructor, "construct_document",
                        lambda self, node: built.append(node) or real(self, node))
    _out, err, exc = run(path, "--dry-run")
    assert exc is not None and exc.returncode == 2
    assert "aliases" in err and "not allowed" in err and "line 2" in err
    assert built == []  # refused while composing: no list of lists was ever constructed
    assert Schedule.objects.count() == 0


def test_an_alias_inside_a_schedule_is_refused_too(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("version: 1\nschedules:\n  - &one {name: a, target_id: demo.noop, trigger_kind: manual}\n"
                    "  - *one\n")
    _out, err, exc = run(path)
    assert exc is not None and "aliases (*name) are not allowed" in err
    assert Schedule.objects.count() == 0


def test_a_file_that_parses_as_yaml_is_quoted_only_as_a_short_escaped_excerpt(tmp_path):
    path = tmp_path / "shadow"
    path.write_text(SHADOW)
    _out, err, exc = run(path, "--dry-run")
    assert exc is not None and exc.returncode == 2
    assert "unknown key" in err
    assert "SeCrEt" not in err and "AbCdEf" not in err and "99999" not in err
    assert "daemon:*" in err or "root:$6" in err  # the start of the key, so the operator sees which file it was
    assert all(len(line) < 160 for line in err.splitlines())


def test_a_file_that_does_not_parse_is_not_quoted_at_all(tmp_path):
    path = tmp_path / "shadow"
    path.write_text("root\t:$6$SeCrEt: [\nx'SeCrEt2'\n")
    _out, err, exc = run(path, "--dry-run")
    assert exc is not None and "not valid YAML (line 1, column 5" in err
    assert "SeCrEt" not in err and "$6" not in err and "\t" not in err


def test_control_characters_of_a_key_are_escaped(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text('"\\e[31mred\\u202e": 1\n')
    _out, err, _exc = run(path, "--dry-run")
    assert "\x1b" not in err and "\u202e" not in err and "\\x1b" in err


def test_an_oversized_integer_in_a_file_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("version: 1\nschedules:\n  - name: a\n    target_id: demo.noop\n    trigger_kind: manual\n"
                    "    params: {rows: " + "9" * 5000 + "}\n")
    _out, err, exc = run(path)
    assert exc is not None and exc.returncode == 2
    assert "line 6" in err and "number" in err and "digits" in err
    assert Schedule.objects.count() == 0


def test_a_file_past_the_size_bound_is_refused_before_parsing(tmp_path, monkeypatch):
    from scheduler.services.definitions import schedule_yaml

    monkeypatch.setattr(schedule_yaml.yaml, "load", lambda *a, **k: pytest.fail("the file was parsed"))
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * schedule_yaml.MAX_FILE_CHARS + "\n")
    _out, err, exc = run(path, "--dry-run")
    assert exc is not None and "is larger than" in err
