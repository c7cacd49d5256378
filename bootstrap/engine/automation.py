"""The Engine over pulumi.automation: the operations groundctl runs on each layer's stack (preview, up,
refresh, destroy, import, clearing pending creates) and what they return, on the stacks LayerStacks
selects and configures. The only place that runs them: above it everything works on `Plan`,
`OperationResult` and plain dicts."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Optional, Sequence

from bootstrap.engine import sdk_objects
from bootstrap.engine.errors import UnexpectedChanges, Where, expected_no_changes, map_error
from bootstrap.engine.events import (changed_fields, coerce_event, counts_from_summary, plan_from_events,
                                     progress_message, root_outputs, summary_changes)
from bootstrap.engine.layer_stacks import LayerStacks
from bootstrap.engine.plan_deviation import PlanDeviation, applied_steps, diagnostics, find_deviation
from bootstrap.engine.pending import (other_pending_operations, pending_create_urns, refuse_other_pending,
                                      unexpected_pending_creates)
from bootstrap.engine.protocol import ProgressFn
from bootstrap.engine.results import OperationResult, StackOutputs, outputs_from_automation
from bootstrap.kit.errors import EngineError, Refused
from bootstrap.planning.plan import Plan


def missing_providers(import_plan: Mapping[str, Any], state_urns: set[str]) -> list[str]:
    """Explicit provider URNs the document's resources use that the stack lacks and the document gives
    no `providerInputs` for. Pure."""
    table = dict(import_plan.get("nameTable") or {})
    inputs = set(import_plan.get("providerInputs") or {})
    wanted = []
    for entry in import_plan.get("resources") or []:
        ref = entry.get("provider")
        urn = table.get(ref) if ref else None
        if urn and "::pulumi:providers:" in urn and urn not in state_urns and ref not in inputs \
                and urn not in wanted:
            wanted.append(urn)
    return wanted


def _read_event_log(path: str) -> list[dict]:
    """The engine events of a finished command's --event-log (one JSON object a line); none if it wrote none."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line cut short by a killed CLI
        if isinstance(item, dict):
            events.append(item)
    return events


def _parsed(items: list[dict]) -> list:
    parsed = []
    for item in items:
        try:
            parsed.append(coerce_event(item))
        except Exception:  # noqa: BLE001 - an event kind this SDK does not know says nothing groundctl reads
            continue
    return parsed


class PulumiEngine(LayerStacks):
    """The Engine (bootstrap/engine/protocol.py) over pulumi.automation. Its state beyond LayerStacks's is
    the update plan each `preview(save_plan=True)` (or `use_reviewed_plan`) keeps for the layer's next `up`."""

    def __init__(self, spec, **options):
        # `options` are LayerStacks's: the endpoint, lineage, passphrase variable and the engine tier's seams.
        super().__init__(spec, **options)
        self._saved_plans: dict[str, str] = {}  # layer → private folder holding its saved update plan
        self._reviewed: set[str] = set()  # layers whose saved plan came from a review (use_reviewed_plan)
        self._diff_keys: dict[str, dict[str, set[str]]] = {}  # layer → URN → fields its last preview changed

    def _events(self, sink: list | None, on_progress: Optional[ProgressFn]):
        def on_event(event) -> None:
            if sink is not None:
                sink.append(event)
            if on_progress is not None:
                message = progress_message(event)
                if message:
                    on_progress(message)
        return on_event

    def _result(self, layer: str, operation: str, summary, outputs: StackOutputs | None = None) -> OperationResult:
        counts = counts_from_summary(getattr(summary, "resource_changes", None) if summary else None)
        return OperationResult(layer, operation, counts, outputs if outputs is not None else self.outputs(layer))

    def _update_result(self, layer: str, stack, events: list) -> tuple[Any, StackOutputs]:
        """An update's counts and the outputs it left, from its own summary and root outputs events; a stack
        history read (and two outputs reads) where an event is missing, as the SDK's up always runs them."""
        changes, outputs = summary_changes(events), root_outputs(events)
        summary = stack.info() if changes is None else SimpleNamespace(resource_changes=changes)
        if outputs is None:
            return summary, outputs_from_automation(stack.outputs())
        self._outputs_seen[layer] = outputs
        return summary, self._outputs_of(layer, stack, outputs)

    # -- Engine protocol --------------------------------------------------------------------------

    def supports_saved_plans(self) -> bool:
        # `preview --save-plan` / `up --plan` exist from CLI v3.24.0 (changelog/v3.24.0.md); `_pulumi_command`
        # refused any CLI older than PULUMI_CLI_MIN, far above it, before this engine was built.
        return True

    def preview(self, layer: str, *, refresh: bool = False, expect_no_changes: bool = False,
                save_plan: bool = False, on_progress: Optional[ProgressFn] = None) -> Plan:
        stack = self._stack(layer)
        self._require_no_pending(layer, "preview", stack)
        events: list = []
        self._drop_saved_plan(layer)
        plan_file = self._new_plan_file(layer) if save_plan else None
        try:
            stack.preview(on_event=self._events(events, on_progress), refresh=refresh or None,
                          expect_no_changes=expect_no_changes or None, color="never", diff=False,
                          plan=plan_file)
        except Exception as exc:  # noqa: BLE001
            # Only the CLI's own --expect-no-changes failure means "changes": a preview that failed for any
            # other reason (a resource it could not read, a program error) proved nothing about drift, and
            # the steps it announced before failing (a refresh that never finished) are not changes.
            if expect_no_changes and expected_no_changes(exc):
                raise UnexpectedChanges(plan_from_events(layer, self.environment, events)) from None
            raise map_error(exc, Where(self.environment, layer, "preview"), self._secrets) from None
        plan = plan_from_events(layer, self.environment, events)
        self._diff_keys[layer] = changed_fields(events)
        if expect_no_changes and plan.has_changes:
            raise UnexpectedChanges(plan)
        return plan

    def saved_plan(self, layer: str) -> Optional[str]:
        path = self._plan_file(layer)
        if path is None:
            return None
        with open(path, encoding="utf-8") as fh:
            return fh.read()

    def use_reviewed_plan(self, layer: str, text: str) -> None:
        self._drop_saved_plan(layer)
        path = self._new_plan_file(layer)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        self._reviewed.add(layer)

    def up(self, layer: str, *, use_saved_plan: bool = False,
           on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        self._require_no_pending(layer, "up", stack)
        plan_file = self._plan_file(layer) if use_saved_plan else None
        if use_saved_plan and plan_file is None:
            raise EngineError(f"No saved plan of layer '{layer}' is left to apply: preview it again "
                              "(`groundctl up` does, under the lock) and approve that plan.")
        reviewed = use_saved_plan and layer in self._reviewed
        events: list = []
        self._state_written(layer)

        def run():
            try:
                if reviewed:
                    self._reviewed_up(stack, plan_file, events, on_progress)
                else:  # the SDK's up without the reads after it (bootstrap/engine/sdk_objects.py)
                    sdk_objects.run_up(stack, ["up", "--yes", "--skip-preview", "--color", "never", "--suppress-outputs",
                                               "--message", "groundctl up", *(["--plan", plan_file] if plan_file else [])],
                                       self._events(events, on_progress))
                return self._update_result(layer, stack, events)
            except Exception as exc:  # noqa: BLE001 - a deviation is a refusal; anything else goes to map_error
                found = find_deviation(diagnostics(events), str(exc), self._diff_keys.get(layer, {})) \
                    if use_saved_plan else None
                if found is None:
                    raise
                raise PlanDeviation(self.environment, layer, found, applied_steps(events), reviewed) from None
        try:
            summary, outputs = self._call(layer, "up", run)
        finally:
            if use_saved_plan:
                self._drop_saved_plan(layer)
        return self._result(layer, "up", summary, outputs)

    def _reviewed_up(self, stack, plan_file: str, events: list, on_progress: Optional[ProgressFn]) -> None:
        """`pulumi up --plan FILE` with the update's own preview first: the SDK's up always skips it
        (--skip-preview), and then a deviating step is found only once the steps before it have run; the
        preview finds it before any step runs (pkg/backend/apply.go, PreviewThenPromptThenExecute)."""
        folder = tempfile.mkdtemp(prefix="groundctl-events-")  # events carry resource inputs: private
        log = os.path.join(folder, "events.jsonl")
        try:
            stack._run_pulumi_cmd_sync(["up", "--yes", "--plan", plan_file, "--color", "never", "--suppress-outputs",
                                        "--message", "groundctl up (reviewed plan)", "--exec-kind", "auto.local",
                                        "--event-log", log])
        finally:
            events.extend(_parsed(_read_event_log(log)))
            shutil.rmtree(folder, ignore_errors=True)
            for event in events if on_progress else ():
                message = progress_message(event)
                if message:
                    on_progress(message)

    def _new_plan_file(self, layer: str) -> str:
        # A plan file holds resource inputs (secrets encrypted): a private folder, removed after the up.
        folder = tempfile.mkdtemp(prefix="groundctl-plan-")
        self._saved_plans[layer] = folder
        atexit.register(shutil.rmtree, folder, True)  # a plan never applied is not left behind either
        return os.path.join(folder, f"{layer}.plan.json")

    def _plan_file(self, layer: str) -> Optional[str]:
        folder = self._saved_plans.get(layer)
        path = os.path.join(folder, f"{layer}.plan.json") if folder else None
        return path if path and os.path.isfile(path) else None

    def _drop_saved_plan(self, layer: str) -> None:
        self._reviewed.discard(layer)
        folder = self._saved_plans.pop(layer, None)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)

    def refresh(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        self._state_written(layer)
        res = self._call(layer, "refresh", lambda: stack.refresh(
            on_event=self._events(None, on_progress), color="never", message="groundctl refresh",
            suppress_outputs=True))
        return self._result(layer, "refresh", res.summary)

    def destroy(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        self._require_no_pending(layer, "destroy", stack)
        self._state_written(layer)
        res = self._call(layer, "destroy", lambda: stack.destroy(
            on_event=self._events(None, on_progress), color="never", message="groundctl destroy",
            suppress_outputs=True))
        return self._result(layer, "destroy", res.summary, StackOutputs({}))

    def outputs(self, layer: str) -> StackOutputs:
        stack = self._stack(layer)
        seen = self._outputs_seen.get(layer)
        if seen is not None:  # the state as this run last exported or updated it, not written since
            return self._outputs_of(layer, stack, seen)
        return outputs_from_automation(self._call(layer, "outputs", stack.outputs))

    def export_state(self, layer: str) -> dict:
        stack = self._stack(layer)
        dep = self._call(layer, "state export", stack.export_stack)
        self._saw_state(layer, dep.deployment if isinstance(dep.deployment, dict) else {})
        return {"version": dep.version, "deployment": dep.deployment}

    def import_resources(self, layer: str, import_plan: dict, *,
                         on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        missing = missing_providers(import_plan, self._state_urns(layer))
        self._state_written(layer)
        if missing:
            # An explicit provider the file names but the stack lacks would be built by `pulumi import`
            # from the file's providerInputs, or else from ambient settings (pkg/resource/deploy/import.go).
            # Without inputs, the program creates it, with its own region, role and allowed account.
            self._call(layer, "provider creation", lambda: stack.up(
                target=missing, color="never", message="groundctl import: providers", suppress_outputs=True,
                on_event=self._events(None, on_progress)))
        # Not the SDK's import_resources: it writes only `resources` and `nameTable`, dropping
        # `providerInputs`; the whole document goes in a private file that is removed afterwards.
        self._with_private_file(layer, "import", import_plan, lambda f: stack._run_pulumi_cmd_sync(
            ["import", "--file", f, "--yes", "--skip-preview", "--protect=false", "--generate-code=false",
             "--message", "groundctl import"]))
        summary = self._call(layer, "import", stack.info)
        if on_progress:
            on_progress(f"{layer}: imported {len(import_plan.get('resources', []))} resource(s)")
        return self._result(layer, "import", summary)

    def clear_pending_creates(self, layer: str, urns: Sequence[str], *,
                              on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        deployment = self.export_state(layer).get("deployment") or {}
        not_creates = other_pending_operations(deployment)
        if not_creates:
            raise refuse_other_pending(self.environment, layer, not_creates)
        others = unexpected_pending_creates(deployment, urns)
        if others:
            raise Refused(
                f"Layer '{layer}' of environment '{self.environment}' has pending creates that were not "
                f"decided on: {', '.join(others)}. Clearing drops every pending create, so nothing was "
                "changed. Run `groundctl recover` again: it decides on each one from the current state.")
        pending = pending_create_urns(deployment)
        if not pending:
            return OperationResult(layer, "clear-pending-creates", {}, self.outputs(layer))
        roots = [r["urn"] for r in deployment.get("resources") or []
                 if isinstance(r, dict) and r.get("type") == "pulumi:pulumi:Stack" and isinstance(r.get("urn"), str)]
        # Targeted at the root stack resource, the refresh reads no resource: the only change it writes
        # is the removal of the pending creates (which happens before, and whatever, the refresh targets:
        # pkg/cmd/pulumi/operations/refresh.go).
        self._state_written(layer)
        res = self._call(layer, "clear pending creates", lambda: stack.refresh(
            clear_pending_creates=True, target=roots or None, on_event=self._events(None, on_progress),
            color="never", message="groundctl: clear pending creates", suppress_outputs=True))
        left = pending_create_urns(self.export_state(layer).get("deployment") or {})
        if left:
            raise EngineError(f"Pulumi's refresh of layer '{layer}' finished but the state still holds pending "
                              f"creates: {', '.join(left)}. Check the Pulumi CLI version (3.x with "
                              "`refresh --clear-pending-creates`) and run `groundctl recover` again.")
        if on_progress:
            on_progress(f"{layer}: cleared {len(pending)} pending create(s)")
        return self._result(layer, "clear-pending-creates", res.summary)

    def _state_urns(self, layer: str) -> set[str]:
        deployment = self.export_state(layer).get("deployment") or {}
        return {r.get("urn") for r in deployment.get("resources") or [] if isinstance(r, dict)}

    def _with_private_file(self, layer: str, operation: str, doc: dict, run: Callable[[str], Any]) -> Any:
        """Write `doc` to a file only this user can read, run, and remove it whatever happens."""
        import json

        tmp = tempfile.mkdtemp(prefix="groundctl-")  # mode 0700
        path = os.path.join(tmp, "doc.json")

        def write_and_run():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(doc, fh)
            return run(path)

        try:
            # The write is inside _call too: a full disk becomes one scrubbed paragraph, not a traceback.
            return self._call(layer, operation, write_and_run)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
