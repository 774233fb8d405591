"""`RunObserver`: connects the trainer's events to the metric suite, the writers and results.json.

The trainer never imports a metric or a writer; the experiment hands it this observer.
"""

from extreme_mem.metrics import base as metrics_base
from extreme_mem.summaries import writers as writers_lib
from extreme_mem.train import trainer as trainer_lib


class RunObserver(trainer_lib.Observer):
    """Connects trainer events to the metric suite, the writers and results.json."""

    def __init__(self, suite, writers, record, model, data):
        self._suite, self._writers, self._record = suite, writers, record
        self._model, self._data = model, data

    def needs(self, step):
        return self._suite.needs(step)

    def on_restore(self, step):
        """Keeps the results history up to the restored checkpoint's step (later entries are redone)."""
        self._record.resume(step)
        self._record.save()

    def on_step(self, step, outputs):
        self._suite.update(step, outputs)
        values = self._suite.result(step)
        self._suite.reset()
        if values:
            self._writers.write(values, step)
            self._record.add(step, writers_lib.scalars(values))

    def on_eval(self, step, results, evals):
        """Writes the trainer's evaluation and the plugins' evaluation-time tags; returns the latter."""
        context = metrics_base.EvalContext(step=step, model=self._model, data=self._data, evals=evals)
        extra = self._suite.evaluate(context)
        values = {**results, **extra}
        self._writers.write(values, step)
        self._writers.flush()
        self._record.add(step, writers_lib.scalars(values))
        self._record.save()
        return writers_lib.scalars(extra)
