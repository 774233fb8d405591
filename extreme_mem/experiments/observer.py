"""`RunObserver`: connects the trainer's events to the metric suite, the writers and results.json.

The trainer never imports a metric or a writer; the experiment hands it this observer.
"""

from extreme_mem.metrics import base as metrics_base
from extreme_mem.train import trainer as trainer_lib


class RunObserver(trainer_lib.Observer):
    """Connects trainer events to the metric suite, the writers and results.json."""

    def __init__(self, suite, writers, record, model, data):
        self._suite, self._writers, self._record = suite, writers, record
        self._model, self._data = model, data

    def needs(self, step):
        return self._suite.needs(step)

    def wants_gram(self):
        return self._suite.wants_gram()

    def on_step(self, step, outputs):
        self._suite.update(step, outputs)
        values = self._suite.result(step)
        self._suite.reset()
        if values:
            self._writers.write(values, step)
            self._record.add(step, values)

    def on_eval(self, step, results, evals):
        context = metrics_base.EvalContext(step=step, model=self._model, data=self._data, evals=evals)
        values = {**results, **self._suite.evaluate(context)}
        results.update(values)  # the trainer's `final` includes evaluation-time metrics
        self._writers.write(values, step)
        self._writers.flush()
        self._record.add(step, values)
        self._record.save()
