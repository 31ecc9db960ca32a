"""migrations/schema.sql: the schema the migrations build, in one readable file.

    python -m tools.schema_sql            # rewrite migrations/schema.sql
    python -m tools.schema_sql --check    # exit 1 if it is out of date

Migrates a new, empty database (on the embedded PostgreSQL, or on the server
of --server-url) and writes what the catalog then holds, table by table
(columns, defaults, constraints, indexes), then functions
(pg_get_functiondef), then triggers (pg_get_triggerdef), in an order that
only a schema change can change. Everything above MARKER in the file is
written by hand and kept. No pg_dump: a fresh clone has Python and psycopg.

The migrations stay the only way a database is built (`authsvc db upgrade`);
this file is for reading, and tests/test_schema_file.py holds it to them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from testkit.postgres import migrated_database, server_or_throwaway

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "migrations" / "schema.sql"
COMMAND = "python -m tools.schema_sql"
MARKER = f"-- ==== Generated below this line by `{COMMAND}`: do not edit by hand. ===="
# The schema authsvc's migrations create everything in.
SCHEMA = "public"

_SIMPLE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


class UnsupportedObject(RuntimeError):
    """The schema holds a kind of object this tool cannot write yet."""


@dataclass(frozen=True)
class Function:
    oid: int
    name: str
    definition: str


def render(conn: psycopg.Connection) -> str:
    """The generated part of schema.sql for the database `conn` is connected to."""
    _refuse_unsupported(conn)
    version = conn.execute("SHOW server_version_num").fetchone()
    major = int(version[0]) // 10000 if version else 0
    out = [
        MARKER,
        f"-- From PostgreSQL {major} (other major versions may word expressions differently).",
        "",
    ]
    functions = _functions(conn)
    early = _functions_tables_need(conn, functions)
    if early:
        out += ["-- Functions that column defaults, checks or indexes call.", ""]
        out += [f.definition for f in early]
    for oid, name in _tables(conn):
        out += _table(conn, oid, name)
    rest = [f for f in functions if f not in early]
    if rest:
        out += ["-- Functions", ""]
        out += [f.definition for f in rest]
    triggers = _triggers(conn)
    if triggers:
        out += ["-- Triggers", ""]
        out += triggers
    return "\n".join(out).rstrip("\n") + "\n"


def _refuse_unsupported(conn: psycopg.Connection) -> None:
    """Fail loudly on objects this tool would otherwise leave out of the file."""
    found = conn.execute(
        """
        SELECT 'relation ' || c.relname || ' (relkind ' || c.relkind::text || ')'
        FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s AND c.relkind NOT IN ('r', 'i', 'S')
        UNION ALL
        SELECT 'type ' || t.typname
        FROM pg_type AS t JOIN pg_namespace AS n ON n.oid = t.typnamespace
        WHERE n.nspname = %(schema)s AND t.typtype IN ('e', 'd', 'r', 'm')
        UNION ALL
        SELECT 'aggregate or window function ' || p.proname
        FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
        WHERE n.nspname = %(schema)s AND p.prokind IN ('a', 'w')
        UNION ALL
        SELECT 'extension ' || extname FROM pg_extension WHERE extname <> 'plpgsql'
        UNION ALL
        SELECT 'schema ' || nspname FROM pg_namespace
        WHERE nspname NOT IN (%(schema)s, 'information_schema') AND nspname NOT LIKE 'pg\\_%%'
        UNION ALL
        SELECT 'table inheritance ' || inhrelid::regclass::text FROM pg_inherits
        UNION ALL
        SELECT 'policy ' || polname FROM pg_policy
        UNION ALL
        SELECT 'rule ' || r.rulename FROM pg_rewrite AS r JOIN pg_class AS c ON c.oid = r.ev_class
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s AND c.relkind = 'r'
        ORDER BY 1
        """,
        {"schema": SCHEMA},
    ).fetchall()
    if found:
        names = ", ".join(row[0] for row in found)
        raise UnsupportedObject(f"tools/schema_sql.py does not write these yet: {names}")


def _tables(conn: psycopg.Connection) -> list[tuple[int, str]]:
    """Tables in creation order, a referenced table before those that reference it.

    Creation order is the baseline migration's (users first, then what each
    owner keeps, the test inbox last, later migrations' tables after them) and
    is the same in a database built from schema.sql itself, since that file
    creates them in this order.
    """
    rows = conn.execute(
        """
        SELECT c.oid, quote_ident(c.relname),
               ARRAY(SELECT DISTINCT k.confrelid FROM pg_constraint AS k
                     WHERE k.conrelid = c.oid AND k.contype = 'f' AND k.confrelid <> c.oid)
        FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = %s AND c.relkind = 'r'
        ORDER BY c.oid
        """,
        (SCHEMA,),
    ).fetchall()
    return _dependencies_first([(oid, name) for oid, name, _ in rows],
                               {oid: set(refs) for oid, _, refs in rows})


def _dependencies_first(
    items: Sequence[tuple[int, str]], needs: dict[int, set[int]]
) -> list[tuple[int, str]]:
    """`items` in their order, except that each comes after what it needs."""
    placed: list[tuple[int, str]] = []
    done: set[int] = set()
    waiting = list(items)
    while waiting:
        ready = next((item for item in waiting if needs.get(item[0], set()) <= done), None)
        if ready is None:  # a cycle: keep the given order for what is left
            ready = waiting[0]
        waiting.remove(ready)
        placed.append(ready)
        done.add(ready[0])
    return placed


def _table(conn: psycopg.Connection, oid: int, name: str) -> list[str]:
    columns = conn.execute(
        """
        SELECT quote_ident(a.attname), format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated,
               CASE WHEN a.attcollation <> t.typcollation
                    THEN (SELECT quote_ident(collname) FROM pg_collation
                          WHERE oid = a.attcollation) END,
               pg_get_serial_sequence(a.attrelid::regclass::text, a.attname),
               col_description(a.attrelid, a.attnum)
        FROM pg_attribute AS a
        JOIN pg_type AS t ON t.oid = a.atttypid
        LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attnum
        """,
        (oid,),
    ).fetchall()
    constraints = conn.execute(
        """
        SELECT quote_ident(conname), pg_get_constraintdef(oid)
        FROM pg_constraint
        WHERE conrelid = %s AND contype IN ('p', 'u', 'f', 'c', 'x')
        ORDER BY array_position(ARRAY['p', 'u', 'x', 'f', 'c']::"char"[], contype), conname
        """,
        (oid,),
    ).fetchall()
    width = max(len(column[0]) for column in columns)
    lines = []
    comments = []
    for column_name, type_name, not_null, default, identity, generated, collation, \
            sequence, comment in columns:
        line = f"    {column_name:<{width}} {type_name}"
        if collation:
            line += f" COLLATE {collation}"
        if generated == "s":
            line += f" GENERATED ALWAYS AS ({default}) STORED"
        elif identity:
            line += " GENERATED " + ("ALWAYS" if identity == "a" else "BY DEFAULT")
            line += " AS IDENTITY" + _identity_options(conn, sequence, name, column_name)
        elif default is not None:
            line += f" DEFAULT {default}"
        if not_null:
            line += " NOT NULL"
        lines.append(line)
        if comment is not None:
            comments.append(f"COMMENT ON COLUMN {name}.{column_name} IS {_literal(conn, comment)};")
    lines += [f"    CONSTRAINT {constraint} {definition}" for constraint, definition in constraints]
    options = conn.execute(
        "SELECT c.relpersistence, c.reloptions, obj_description(c.oid, 'pg_class')"
        " FROM pg_class AS c WHERE c.oid = %s",
        (oid,),
    ).fetchone()
    assert options is not None
    persistence, reloptions, table_comment = options
    head = "CREATE UNLOGGED TABLE" if persistence == "u" else "CREATE TABLE"
    tail = f" WITH ({', '.join(reloptions)})" if reloptions else ""
    out = [f"{head} {name} (", ",\n".join(lines), f"){tail};"]
    if table_comment is not None:
        out.append(f"COMMENT ON TABLE {name} IS {_literal(conn, table_comment)};")
    out += comments
    indexes = conn.execute(
        """
        SELECT pg_get_indexdef(i.indexrelid)
        FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
        WHERE i.indrelid = %s
          AND NOT EXISTS (SELECT 1 FROM pg_constraint AS k
                          WHERE k.conrelid = i.indrelid AND k.conindid = i.indexrelid
                            AND k.contype IN ('p', 'u', 'x'))
        ORDER BY c.relname
        """,
        (oid,),
    ).fetchall()
    out += [f"{row[0]};" for row in indexes]
    out += [f"ALTER SEQUENCE {row[0]} OWNED BY {name}.{row[1]};" for row in conn.execute(
        # A sequence owned by a column that is not an identity (serial): rare here.
        """
        SELECT s.oid::regclass::text, quote_ident(a.attname)
        FROM pg_depend AS d
        JOIN pg_class AS s ON s.oid = d.objid AND s.relkind = 'S'
        JOIN pg_attribute AS a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
        WHERE d.refobjid = %s AND d.deptype = 'a' AND d.classid = 'pg_class'::regclass
        ORDER BY 1
        """,
        (oid,),
    )]
    return [*out, ""]


def _identity_options(
    conn: psycopg.Connection, sequence: str | None, table: str, column: str
) -> str:
    """An identity's sequence options where they differ from what CREATE TABLE gives."""
    if sequence is None:
        return ""
    row = conn.execute(
        """
        SELECT s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,
               format_type(s.seqtypid, NULL), c.relname
        FROM pg_sequence AS s JOIN pg_class AS c ON c.oid = s.seqrelid
        WHERE s.seqrelid = %s::regclass
        """,
        (sequence,),
    ).fetchone()
    assert row is not None
    start, increment, minimum, maximum, cache, cycle, type_name, sequence_name = row
    limits = {"smallint": 2**15 - 1, "integer": 2**31 - 1, "bigint": 2**63 - 1}
    options = []
    implicit = f"{table}_{column}_seq".replace('"', "")  # what CREATE TABLE names it
    if sequence_name != implicit:
        options.append(f"SEQUENCE NAME {sequence}")
    if start != 1:
        options.append(f"START WITH {start}")
    if increment != 1:
        options.append(f"INCREMENT BY {increment}")
    if minimum != 1:
        options.append(f"MINVALUE {minimum}")
    if maximum != limits.get(type_name):
        options.append(f"MAXVALUE {maximum}")
    if cache != 1:
        options.append(f"CACHE {cache}")
    if cycle:
        options.append("CYCLE")
    return f" ({' '.join(options)})" if options else ""


def _functions(conn: psycopg.Connection) -> list[Function]:
    """Functions and procedures by name, each after the ones its body calls."""
    rows = conn.execute(
        """
        SELECT p.oid, p.proname, pg_get_functiondef(p.oid),
               obj_description(p.oid, 'pg_proc'), p.oid::regprocedure::text
        FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
        WHERE n.nspname = %s
          AND NOT EXISTS (SELECT 1 FROM pg_depend AS d
                          WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                            AND d.deptype = 'e')
        ORDER BY p.proname, p.oid::regprocedure::text
        """,
        (SCHEMA,),
    ).fetchall()
    functions = {}
    for oid, name, definition, comment, signature in rows:
        text = definition.rstrip("\n") + ";\n"
        if comment is not None:
            text += f"COMMENT ON FUNCTION {signature} IS {_literal(conn, comment)};\n"
        functions[oid] = Function(oid, name, text)
    # A SQL function's body is checked when it is created, so what it calls
    # must exist by then; pg_depend does not record calls in a $$ body.
    calls = {
        f.oid: {g.oid for g in functions.values()
                if g.oid != f.oid and re.search(rf"\b{re.escape(g.name)}\s*\(", f.definition)}
        for f in functions.values()
    }
    ordered = _dependencies_first([(f.oid, f.name) for f in functions.values()], calls)
    return [functions[oid] for oid, _ in ordered]


def _functions_tables_need(conn: psycopg.Connection, functions: list[Function]) -> list[Function]:
    """Functions a column default, check or index calls (they must exist before the table)."""
    needed = {row[0] for row in conn.execute(
        """
        SELECT d.refobjid FROM pg_depend AS d
        WHERE d.refclassid = 'pg_proc'::regclass
          AND d.classid IN ('pg_attrdef'::regclass, 'pg_constraint'::regclass,
                            'pg_class'::regclass)
        """
    )}
    by_oid = {f.oid: f for f in functions}
    # ... and whatever those call in turn.
    grown = True
    while grown:
        grown = False
        for f in functions:
            if f.oid in needed:
                continue
            if any(re.search(rf"\b{re.escape(f.name)}\s*\(", by_oid[o].definition)
                   for o in needed if o in by_oid):
                needed.add(f.oid)
                grown = True
    return [f for f in functions if f.oid in needed]


def _triggers(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        """
        SELECT c.relname, pg_get_triggerdef(t.oid, true)
        FROM pg_trigger AS t
        JOIN pg_class AS c ON c.oid = t.tgrelid
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = %s AND NOT t.tgisinternal
        ORDER BY c.oid, t.tgname
        """,
        (SCHEMA,),
    ).fetchall()
    out = []
    table = None
    for relname, definition in rows:
        if relname != table and table is not None:
            out.append("")
        table = relname
        out.append(_wrap_trigger(definition) + ";")
    return out


def _wrap_trigger(definition: str) -> str:
    """pg_get_triggerdef's one line, broken before its clauses as the migrations write them."""
    for clause in (" REFERENCING ", " FOR EACH ", " EXECUTE FUNCTION "):
        definition = definition.replace(clause, "\n    " + clause.lstrip(), 1)
    return definition


def _literal(conn: psycopg.Connection, text: str) -> str:
    row = conn.execute("SELECT quote_literal(%s::text)", (text,)).fetchone()
    assert row is not None
    return str(row[0])


# -- The file -------------------------------------------------------------------------------


def header(path: Path = SCHEMA_FILE) -> str:
    """The hand-written part of the file: everything above the marker line."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    before, found, _ = text.partition(MARKER)
    if not found:
        raise SystemExit(f"{path}: no marker line; the generated part starts at:\n{MARKER}")
    return before


def schema_file_text(generated: str, path: Path = SCHEMA_FILE) -> str:
    return header(path) + generated


# -- A database to read ---------------------------------------------------------------------


def generate(server_url: str | None = None) -> str:
    """The generated part, from a freshly migrated database."""
    with server_or_throwaway(server_url) as server, migrated_database(server, "schema") as url, \
            psycopg.connect(url, autocommit=True) as conn:
        return render(conn)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if migrations/schema.sql is out of date")
    parser.add_argument("--server-url",
                        help="a PostgreSQL server to build a scratch database on"
                             " (default: an embedded one in a temporary folder)")
    args = parser.parse_args(argv)
    wanted = schema_file_text(generate(args.server_url))
    current = SCHEMA_FILE.read_text(encoding="utf-8")
    if args.check:
        if wanted != current:
            print(f"{SCHEMA_FILE.relative_to(ROOT)} is out of date: run `{COMMAND}`",
                  file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        SCHEMA_FILE.write_text(wanted, encoding="utf-8")
        print(f"wrote {SCHEMA_FILE.relative_to(ROOT)}")
    else:
        print(f"{SCHEMA_FILE.relative_to(ROOT)} is up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
