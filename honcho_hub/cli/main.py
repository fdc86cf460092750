"""Command line for operators: `python -m honcho_hub <command>`.

Settings: HONCHO_* variables over an optional `--config` YAML file (the memory-control verbs: the
plugin's config.json). Exit codes 0 done, 1 failed, 2 usage, 3 degraded: see docs/architecture.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from .. import hub
from ..chats import forget
from ..errors import (
    BackfillError,
    ConfigFileError,
    ForgetRefused,
    InvalidValue,
    MemoryFileError,
    OutboxError,
)
from ..gateway.gateway import HonchoGateway
from ..ops import memory_file, observation, purge
from ..ops import operator as operations
from ..ops.status import build_status, status_text
from ..settings import log_level
from ..settings.config import Settings
from ..settings.effective import ConfigLayers, effective_settings
from ..settings.files import load_config_file
from ..settings.upgrade import last_upgrade
from ..tool.actions import ActionContext
from . import agent_zero_files, backfill, knobs

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DEGRADED = 0, 1, 2, 3
# What add_subparsers returns (argparse names no public type).
Subcommands = argparse._SubParsersAction


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None,
         out: TextIO | None = None) -> int:
    """Parse, run one command, print its result; returns the exit code."""
    out = out or sys.stdout
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in KNOBS:
        return _knob(parser, args, os.environ if environ is None else environ, out)
    # Backfill also builds each project's settings, so it needs the environment.
    if args.command == "backfill":
        return _backfill(parser, args, os.environ if environ is None else environ, out)
    try:
        settings = load_settings(args.config, os.environ if environ is None else environ)
    except ConfigFileError as exc:
        # Exits 2: the file was named on purpose, so it must be usable.
        parser.error(f"--config: {exc}")
    # Global settings here: no project, no chat.
    hub.current().reconfigure(settings=lambda: settings)
    try:
        return COMMANDS[args.command](settings, args, out)
    finally:
        hub.shutdown()


def load_settings(config_path: str | None, environ: Mapping[str, str]) -> Settings:
    """Settings from the environment over the `--config` file (their `debug` applied to the plugin's
    loggers); raises ConfigFileError."""
    layers = ConfigLayers(global_config=load_config_file(config_path) if config_path else {})
    settings = effective_settings(layers, secrets={}, environ=environ)
    log_level.follow(settings)
    return settings


def _status(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    parts = hub.current().status_parts(settings)
    parts.upgrade = last_upgrade(knobs.default_plugin_dir())
    parts.worker = {"state": "not_in_this_process", "metrics": {}, "circuits": {}}
    status = build_status(settings, parts, time.time())
    _print(out, status, args.json, status_text)
    return exit_code_for(status)


def exit_code_for(status: dict) -> int:
    """Green and neutral (nothing known to be wrong, Honcho not reached yet) are 0, amber 3, red
    1."""
    return {"green": EXIT_OK, "neutral": EXIT_OK,
            "amber": EXIT_DEGRADED}.get(status["health"], EXIT_FAILED)


def _check(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    result = operations.check(settings)
    _print(out, result, args.json, lambda r: (
        f"API: {'ok' if r['api']['ok'] else 'FAILED (' + str(r['api']['error']) + ')'}"
        f" in {r['api']['latency_ms']} ms\n"
        f"MCP: {r['mcp']['summary']}"
        + ("" if r["mcp"]["state"] == "not_configured" else f" in {r['mcp']['latency_ms']} ms")))
    if not result["api"]["ok"]:
        return EXIT_FAILED
    return EXIT_OK if result["mcp"]["ok"] else EXIT_DEGRADED


def _drain(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    the_hub = hub.current()
    result = operations.drain(settings, args.timeout, worker=the_hub.worker(),
                              flush_capture=the_hub.flush_capture)
    _print(out, result, args.json, lambda r: r.get("error") and f"drain failed: {r['error']}" or
           f"delivered {r['delivered']}, dead-lettered {r['dead']}, {r['pending']} still pending")
    if "error" in result:
        return EXIT_FAILED
    return EXIT_OK if result["pending"] == 0 else EXIT_DEGRADED


def _retry_dead(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    result = operations.retry_dead(settings, hub.current().worker(), args.limit)
    _print(out, result, args.json, lambda r: r.get("error") and f"retry failed: {r['error']}" or
           f"requeued {r['requeued']} dead letters")
    return EXIT_FAILED if "error" in result else EXIT_OK


def _dead(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    result = operations.dead_letters(settings, args.limit)
    _print(out, result, args.json, lambda r: (
        r.get("error") and f"cannot read dead letters: {r['error']}"
        or "\n".join(f"{d['id']}  {d['session_id']}  {d['error_code']}  attempts={d['attempts']}"
                     for d in r["dead"]) or "no dead letters"))
    return EXIT_FAILED if "error" in result else EXIT_OK


def _clear_cache(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    result = operations.clear_cache(settings, hub.current().recaller())
    _print(out, result, args.json, lambda r: (
        "recall caches cleared (Agent Zero drops its cache at its next recall)"))
    return EXIT_OK


def _demo(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    from .demo import run_demo

    return run_demo(settings, real=args.real, out=out)


def _forget_chat(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    """Forget one chat (chats/forget.py), only with --yes, and with --completely what it left: 0
    done, 1 the outbox unusable, 2 no --yes or a bad chat id, 3 still sending, a Honcho session not
    deleted (forgetting again finishes it), or with --completely a leftover not removed or not
    looked for."""
    if not args.yes:
        return _failed("forget-chat", "this deletes the chat's queued messages and its Honcho"
                       " session for good; add --yes to go ahead", EXIT_USAGE)
    if args.wait is not None and not 0 <= args.wait <= forget.MAX_WAIT_S:
        return _failed("forget-chat", f"--wait is 0 to {forget.MAX_WAIT_S:.0f} seconds", EXIT_USAGE)
    try:
        report = forget.forget_chat(settings, args.chat_id, wait_s=args.wait)
    except ForgetRefused as exc:
        return _failed("forget-chat", str(exc), EXIT_USAGE)
    if args.completely and forget.offer_lines(report) and "error" not in report["leftovers"]:
        report["removed"] = forget.forget_leftovers(settings, report["chat_id"])
    _print(out, report, args.json, _forget_text)
    if "error" in report:
        return EXIT_FAILED
    unsearched = args.completely and "error" in report.get("leftovers", {})
    if report["state"] != forget.DONE or report.get("removed", {}).get("not_removed") or unsearched:
        return EXIT_DEGRADED
    return EXIT_OK


def _forget_text(report: dict[str, Any]) -> str:
    text = forget.report_text(report)
    if "removed" in report:
        return text + "\n" + forget.leftovers_text(report["removed"])
    if forget.offer_lines(report) and "error" not in report["leftovers"]:
        text += ("\nthey were kept (--completely removes them with the chat); each can still be"
                 " deleted in the memory inspector, a conclusion by its id, a fact in the card")
    return text


def _purge(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    """Remove the outbox, its journal folder and marker (ops/purge.py) after a confirmation: --yes,
    or "yes" typed on a terminal. 0 done, 1 not an outbox of ours, 2 not confirmed, 3 refused while
    rows wait or another process lives (--force goes ahead)."""
    if not args.yes and not _confirmed(settings.outbox_path):
        return _failed("purge", "this deletes the outbox and the messages it still holds for good;"
                       " add --yes to go ahead", EXIT_USAGE)
    report = purge.purge(settings, force=args.force)
    _print(out, report, args.json, purge.report_text)
    if report["state"] == purge.PURGED:
        return EXIT_OK
    if report["pending"] or report["sending"] or report["live_processes"]:
        return _failed("purge", f"{report['reason']}; nothing removed (let them finish, or add"
                       " --force)", EXIT_DEGRADED)
    return _failed("purge", f"{report['reason']}; nothing removed", EXIT_FAILED)


def _confirmed(path: str) -> bool:
    """Asked on a terminal only: without one (a script, a pipe) nothing is confirmed."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    sys.stderr.write(f"Delete the outbox {path}, its journal folder and marker? Type yes: ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() == "yes"


def _export(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    """The memory file (ops/memory_file.py) on `out`, or in a new file of --output (readable by its
    owner only, never overwritten): 0 complete, 1 not written, 3 incomplete (a part missing)."""
    document = memory_file.export_memory(_memory_context(settings), time.time())
    text = (memory_file.as_markdown(document) if args.format == "markdown"
            else memory_file.as_json(document))
    if args.output is None:
        out.write(text)
    else:
        try:
            descriptor = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            return _failed("export", f"--output: cannot be written ({exc.strerror}); nothing"
                           " written", EXIT_FAILED)
        out.write(memory_file.export_text(document) + "\n")
    if not document["complete"]:
        sys.stderr.write(f"python -m honcho_hub export: {memory_file.export_text(document)}\n")
    return EXIT_OK if document["complete"] else EXIT_DEGRADED


def _import(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    """A memory file into this workspace (ops/memory_file.py): 0 done (or a dry run), 1 nothing
    created (Honcho refused or unreachable), 2 a bad file or session, 3 stopped part-way (running
    it again finishes)."""
    try:
        report = memory_file.import_memory(_memory_context(settings),
                                           memory_file.read(args.file), dry_run=args.dry_run,
                                           session_id=args.session)
    except MemoryFileError as exc:
        return _failed("import", f"{exc}; nothing imported", EXIT_USAGE)
    _print(out, report, args.json, memory_file.report_text)
    return {"failed": EXIT_FAILED, "stopped": EXIT_DEGRADED}.get(report["state"], EXIT_OK)


def _memory_context(settings: Settings) -> ActionContext:
    """The memory tool's context outside any chat: the global peers, no host secrets."""
    return ActionContext(settings=settings, gateway=hub.current().tool_gateway(settings))


COMMANDS = {"status": _status, "check": _check, "drain": _drain, "retry-dead": _retry_dead,
            "dead": _dead, "clear-cache": _clear_cache, "demo": _demo, "forget-chat": _forget_chat,
            "purge": _purge, "export": _export, "import": _import}


# The memory-control verbs: what each passes from its arguments to knobs.py.
KNOBS = {
    "mode": lambda plugin, args: knobs.mode(plugin, args.value),
    "strategy": lambda plugin, args: knobs.strategy(plugin, args.value),
    "tokens": lambda plugin, args: knobs.tokens(plugin, args.value, args.agent_share),
    "peer": lambda plugin, args: knobs.peer(plugin, args.user, args.agent, args.reasoning),
    "observation": lambda plugin, args: knobs.observation(
        plugin, args.value, {name: getattr(args, name) for name in knobs.OBSERVE_FLAGS}),
    "identity": lambda plugin, args: knobs.identity(plugin),
    "sessions": lambda plugin, args: knobs.sessions(plugin, args.limit),
}


def _knob(parser: argparse.ArgumentParser, args: argparse.Namespace, environ: Mapping[str, str],
          out: TextIO) -> int:
    """Run one memory-control verb on the plugin's global settings and print its report."""
    if args.config:
        parser.error("--config: the memory-control verbs read and write the plugin's config.json"
                     " (see --plugin-dir)")
    plugin_dir = args.plugin_dir or knobs.default_plugin_dir()
    if not os.path.isdir(plugin_dir):
        parser.error("--plugin-dir: not a folder")
    existing = getattr(args, "apply_existing", False)
    if getattr(args, "dry_run", False) and not existing:
        return _failed(args.command, "--dry-run goes with --apply-existing", EXIT_USAGE)
    plugin = knobs.GlobalSettings(plugin_dir, environ)
    try:
        report = KNOBS[args.command](plugin, args)
        if existing:  # after a change in the same run: the preset just saved
            report["existing"] = _existing_sessions(plugin, apply=not args.dry_run)
    except InvalidValue as exc:
        return _failed(args.command, f"{exc}; nothing changed", EXIT_USAGE)
    except ConfigFileError as exc:
        return _failed(args.command, f"{knobs.GLOBAL_CONFIG_NAME} {exc}; nothing changed",
                       EXIT_FAILED)
    except OutboxError as exc:
        return _failed(args.command, f"cannot read the outbox ({exc.code})", EXIT_FAILED)
    _print(out, report, args.json, knob_text)
    undone = "existing" in report and (report["existing"]["stopped"]
                                       or report["existing"]["failed"])
    return EXIT_DEGRADED if report["overridden"] or undone else EXIT_OK


def _existing_sessions(plugin: knobs.GlobalSettings, apply: bool) -> dict[str, Any]:
    """The saved observation preset checked (and with `apply` set) on the sessions this install
    made, page after page (ops/observation.py)."""
    settings = plugin.snapshot().settings
    gateway = HonchoGateway.for_settings(settings)
    try:
        return observation.walk(settings, gateway, apply=apply)
    finally:
        gateway.close()


def _failed(command: str, problem: str, code: int) -> int:
    sys.stderr.write(f"python -m honcho_hub {command}: error: {problem}\n")
    return code


def knob_text(report: dict[str, Any]) -> str:
    """A memory-control report as lines: each control with its source, then changes, notes and
    warnings."""
    lines = [f"{c['name']}: {knobs.value_text(c['value'])}  ({c['source']})"
             for c in report["controls"]]
    lines += [f"changed {c['name']}: {knobs.value_text(c['from'])} -> {knobs.value_text(c['to'])}"
              for c in report["changed"]]
    lines += [f"chat {m['chat_id']}"
              f" ({'project ' + m['project'] if m['project'] else 'no project'}) -> session"
              f" {m['session_id']}, captured {_utc(m['first_captured_at'])}"
              f" to {_utc(m['last_captured_at'])}"
              for m in report.get("sessions", [])]
    lines += report["notes"] + [f"warning: {warning}" for warning in report["warnings"]]
    if "existing" in report:
        lines.append(observation.report_text(report["existing"]))
    return "\n".join(lines)


def _utc(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _print(out: TextIO, result: dict[str, Any], as_json: bool, text: Callable[[Any], str]) -> None:
    out.write((json.dumps(result, sort_keys=True) if as_json else text(result)) + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m honcho_hub",
                                     description="Honcho Memory Hub operations")
    parser.add_argument("--config",
                        help="YAML file of plugin settings (HONCHO_* variables still win)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("status", "health, queue, worker and scope"),
                            ("check", "test the API and MCP"),
                            ("clear-cache", "drop recall caches")):
        sub.add_parser(name, help=help_text).add_argument("--json", action="store_true")
    drain = sub.add_parser("drain", help="deliver queued events now")
    drain.add_argument("--timeout", type=float, default=30.0)
    for name, help_text in (("retry-dead", "requeue dead letters (at most 100)"),
                            ("dead", "list dead letters")):
        command = sub.add_parser(name, help=help_text)
        command.add_argument("--limit", type=int, default=operations.MAX_REQUEUE)
    for command in (drain, sub.choices["retry-dead"], sub.choices["dead"]):
        command.add_argument("--json", action="store_true")
    demo = sub.add_parser("demo",
                          help="a scripted conversation through capture, delivery and recall")
    demo.add_argument("--real", action="store_true", help="use your outbox, workspace and peers")
    _knob_parsers(sub)
    _backfill_parser(sub)
    _forget_chat_parser(sub)
    _purge_parser(sub)
    _memory_file_parsers(sub)
    return parser


def _memory_file_parsers(sub: Subcommands) -> None:
    export = sub.add_parser("export", help="the agent's card and conclusions about the user, the"
                            " local record of memory writes and the chat map, as JSON or Markdown")
    export.add_argument("--format", choices=sorted(memory_file.FORMATS), default="json")
    export.add_argument("--output", metavar="FILE",
                        help="write to this new file (never overwritten) instead of stdout")
    command = sub.add_parser("import", help="create in this workspace the conclusions and card"
                             " facts of an export (JSON) that it does not hold yet")
    command.add_argument("file", metavar="FILE", help="a JSON file `export` wrote")
    command.add_argument("--dry-run", action="store_true",
                         help="say what would be created; send nothing")
    command.add_argument("--session", default=memory_file.IMPORT_SESSION, metavar="ID",
                         help="the Honcho session the conclusions go to (made if missing;"
                              f" default {memory_file.IMPORT_SESSION})")
    command.add_argument("--json", action="store_true")


def _purge_parser(sub: Subcommands) -> None:
    command = sub.add_parser("purge",
                             help="before uninstalling: delete the outbox, its journal folder and"
                                  " marker (uninstall keeps them)")
    command.add_argument("--yes", action="store_true", help="go ahead without asking")
    command.add_argument("--force", action="store_true",
                         help="even with rows pending or sending, or another live process")
    command.add_argument("--json", action="store_true")


def _forget_chat_parser(sub: Subcommands) -> None:
    command = sub.add_parser("forget-chat",
                             help="delete a chat's queued messages and its Honcho session;"
                                  " its later messages start a new session")
    command.add_argument("chat_id", metavar="CHAT_ID",
                         help="Agent Zero's chat id (see `sessions`)")
    command.add_argument("--yes", action="store_true",
                         help="go ahead (nothing is forgotten without it)")
    command.add_argument("--wait", type=float, metavar="S",
                         help="wait at most S seconds for sends of the chat on the wire"
                              " (default: lease_s)")
    command.add_argument("--completely", action="store_true",
                         help="also remove the conclusions dreams derived from the chat and the"
                              " card facts matching it (listed without it, and kept)")
    command.add_argument("--json", action="store_true")


def _knob_parsers(sub: Subcommands) -> None:
    """The memory-control verbs: no value shows, a value sets (in the global config.json only)."""
    commands = {
        "mode": ("show or set recall_mode", "hybrid|context|tools"),
        "strategy": ("show or set session_strategy", "per-chat|per-project|global"),
        "tokens": ("show or set max_context_tokens (and agent_representation_share)", "N"),
        "peer": ("show or set the peer ids and the dialectic reasoning level", None),
        "observation": ("show or set the observation preset (flags make it custom)",
                        "seed|directional|unified|custom"),
        "identity": ("workspace, peers, API URL and whether a key is set", None),
        "sessions": ("known chat -> Honcho session mappings, newest first", None),
    }
    for name, (help_text, metavar) in commands.items():
        command = sub.add_parser(name, help=help_text)
        if metavar:
            command.add_argument("value", nargs="?", metavar=metavar)
        command.add_argument("--plugin-dir",
                             help="the plugin folder holding config.json (default: the one holding"
                                  " this package)")
        command.add_argument("--json", action="store_true")
    sub.choices["sessions"].add_argument("--limit", type=int, default=100,
                                         help="at most this many (default 100)")
    sub.choices["tokens"].add_argument("--agent-share", metavar="F",
                                       help="agent_representation_share, 0–0.5")
    peer = sub.choices["peer"]
    peer.add_argument("--user", metavar="ID", help="user_peer_id")
    peer.add_argument("--agent", metavar="ID", help="agent_peer_id")
    peer.add_argument("--reasoning", metavar="LEVEL",
                      help="dialectic_reasoning_level: minimal|low|medium|high|max")
    for name in knobs.OBSERVE_FLAGS:
        flag = "--" + name.removeprefix("observe_").replace("_", "-")
        sub.choices["observation"].add_argument(flag, dest=name, metavar="true|false",
                                                help=f"{name} (custom)")
    sub.choices["observation"].add_argument(
        "--apply-existing", action="store_true",
        help="set the saved preset's flags on the sessions this install made that differ"
             f" (at most {observation.MAX_SESSIONS} a run)")
    sub.choices["observation"].add_argument(
        "--dry-run", action="store_true",
        help="with --apply-existing: say how many sessions differ and how; change nothing")


def _backfill(parser: argparse.ArgumentParser, args: argparse.Namespace, environ: Mapping[str, str],
              out: TextIO) -> int:
    """Import saved Agent Zero chats through the outbox (cli/backfill.py): the report on `out`, a
    progress bar on stderr. 0 done, 1 the outbox or Agent Zero's scheduler list or settings
    unusable, 2 usage, 3 stopped for want of room."""
    if args.limit is not None and args.limit < 1 or not 0 <= args.wait <= backfill.MAX_WAIT_S:
        parser.error(f"--limit is at least 1; --wait is 0 to {backfill.MAX_WAIT_S:.0f} seconds")
    if args.include_forgotten and not args.chat:
        parser.error("--include-forgotten needs --chat ID: a forgotten chat is imported again"
                     " only when named")
    try:
        settings = load_settings(args.config, environ)
        global_layer = load_config_file(args.config) if args.config else {}
    except ConfigFileError as exc:
        parser.error(f"--config: {exc}")
    try:
        folders = agent_zero_files.saved_chats(args.chats_dir, args.chat, args.limit)
        scheduled = agent_zero_files.scheduled_chat_ids(args.chats_dir)
        profile = agent_zero_files.agent_profile(args.chats_dir)
    except BackfillError as exc:
        return _failed("backfill", str(exc), EXIT_USAGE if exc.code == "bad_chats" else EXIT_FAILED)
    the_hub = hub.current().reconfigure(settings=lambda: settings)

    def deliver(seconds: float) -> dict[str, Any]:
        return operations.drain(settings, seconds, worker=the_hub.worker(),
                                flush_capture=the_hub.flush_capture)

    try:
        projects = backfill.project_settings(global_layer, environ, args.chats_dir)
        forgotten = frozenset(args.chat if args.include_forgotten else ())
        report = backfill.Backfill(settings, projects, dry_run=args.dry_run, scheduled=scheduled,
                                   profile=profile, make_room=deliver if args.drain else None,
                                   wait_s=args.wait, progress=sys.stderr,
                                   include_forgotten=forgotten).run(folders)
    finally:
        hub.shutdown()
    _print(out, report, args.json, backfill.report_text)
    if "error" in report:
        return EXIT_FAILED
    return EXIT_DEGRADED if report["stopped"] else EXIT_OK


def _backfill_parser(sub: Subcommands) -> None:
    command = sub.add_parser("backfill",
                             help="import saved Agent Zero chats (typed messages, final answers)")
    command.add_argument("--chats-dir", required=True, metavar="DIR",
                         help="Agent Zero's usr/chats folder")
    command.add_argument("--dry-run", action="store_true",
                         help="count what would be imported; queue nothing")
    command.add_argument("--chat", nargs="+", action="extend", default=[], metavar="ID",
                         help="only these chats")
    command.add_argument("--include-forgotten", action="store_true",
                         help="also the chats named by --chat that forget-chat removed"
                              " (else they are skipped)")
    command.add_argument("--limit", type=int, metavar="N",
                         help="only the N most recently saved chats")
    command.add_argument("--wait", type=float, default=backfill.WAIT_S, metavar="S",
                         help="give up after S seconds without room in the outbox"
                              f" (default {backfill.WAIT_S:.0f})")
    command.add_argument("--drain", action="store_true",
                         help="deliver queued events while waiting for room")
    command.add_argument("--json", action="store_true")
