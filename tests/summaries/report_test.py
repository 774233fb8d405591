"""Tests for extreme_mem/experiments/report.py: values, rank correlation and panels from records."""

import math
import os

from unittest import mock

import numpy as np
from absl.testing import absltest

from extreme_mem.summaries import report

RECORD = {
    'status': 'done',
    'final': {'test/accuracy': 0.5},
    'history': [{'step': 0, 'test/accuracy': 0.2, 'b': None}, {'step': 10, 'test/accuracy': 0.7, 'b': 3.0},
                {'step': 20, 'test/accuracy': 0.5, 'b': 2.0}],
}


class ReportTest(absltest.TestCase):

    def test_pick_last_best(self):
        self.assertEqual(report.pick_tag(RECORD, ['a', 'b']), 'b')
        self.assertIsNone(report.pick_tag(RECORD, 'a'))
        self.assertIsNone(report.pick_tag(None, 'b'))
        self.assertEqual(report.last_value(RECORD, 'b'), 2.0)
        self.assertEqual(report.last_value(RECORD, 'test/accuracy'), 0.5)
        self.assertEqual(report.best_value(RECORD, 'test/accuracy'), 0.7)
        self.assertEqual(report.best_value(RECORD, 'b', mode='min'), 2.0)
        self.assertTrue(math.isnan(report.last_value(RECORD, 'a')))
        self.assertTrue(math.isnan(report.best_value({}, 'a')))

    def test_short_name(self):
        self.assertEqual(report.short_name('test/accuracy'), 'test/accuracy')
        self.assertEqual(report.short_name(['train/rep_alignment/hidden', 'train/rep_alignment/fc']),
                         'train/rep_alignment/…')

    def test_spearman(self):
        result = report.spearman([1, 2, 3, 4], [10, 30, 20, 40])
        self.assertAlmostEqual(result['rho'], 0.8)
        self.assertEqual(result['n'], 4)
        self.assertEqual(report.spearman([1, 2, 3, math.nan], [3, 2, 1, 0])['rho'], -1.0)
        self.assertIsNone(report.spearman([1, 2], [1, 2]))
        self.assertIsNone(report.spearman([1, 1, 1], [1, 2, 3]))

    def test_markdown_table(self):
        self.assertEqual(report.markdown_table([{'a': 1.23456, 'b': None}, {'a': math.nan, 'b': 'x'}]),
                         '| a | b |\n|---|---|\n| 1.235 | — |\n| — | x |')
        self.assertEqual(report.markdown_table([]), '(no runs)')

    def test_plot_panel_and_scatter(self):
        d = self.create_tempdir().full_path
        path = os.path.join(d, 'f', 'b.png')
        self.assertEqual(report.plot_panel({'run': RECORD, 'none': None}, ['a', 'b'], path), ['run'])
        self.assertTrue(os.path.getsize(path) > 0)
        self.assertEqual(report.plot_panel({'run': RECORD}, 'a', os.path.join(d, 'a.png')), [])
        self.assertFalse(os.path.exists(os.path.join(d, 'a.png')))
        points = {'g': [(1, 2, 'x'), (math.nan, 1, '')]}
        self.assertEqual(report.plot_scatter(points, os.path.join(d, 's.png'), 'x', 'y'), 1)
        self.assertEqual(report.plot_scatter({'g': []}, os.path.join(d, 't.png'), 'x', 'y'), 0)

    def test_spearman_min_n(self):
        x, y = [1, 2, 3, 4, math.nan], [10, 30, 20, 40, 50]
        self.assertIsNone(report.spearman(x, y, min_n=5))  # 4 finite pairs
        self.assertEqual(len(report.finite_pairs(x, y)), 4)
        self.assertAlmostEqual(report.spearman(x[:4] + [5], y, min_n=5)['rho'], 0.9)  # 1 - 6*2/(5*24)

    def test_axis_label_exact_then_quantity_then_tag(self):
        with mock.patch.dict(report.TAG_LABELS, {'train/zz': 'Z', 'train/zz/top': 'top Z'}):
            self.assertEqual(report.axis_label('train/zz/top'), 'top Z')
            self.assertEqual(report.axis_label(['train/nothing', 'train/zz/hidden']), 'Z')
            self.assertEqual(report.axis_label('eval/qq'), 'eval/qq')
            self.assertEqual(report.axis_label(['eval/qq/a', 'eval/qq/b']), 'eval/qq/…')

    def test_plot_curves(self):
        d = self.create_tempdir().full_path
        groups = {'a': [(10, 0.5), (0.1, 0.9), (1, math.nan)], 'b': [(0, 0.2), (1, 0.4)]}
        self.assertEqual(report.plot_curves(groups, os.path.join(d, 'c.png'), 'σ', 'acc', logx=True), 3)
        self.assertTrue(os.path.getsize(os.path.join(d, 'c.png')) > 0)
        self.assertEqual(report.plot_curves({'a': [(0, 1)]}, os.path.join(d, 'e.png'), 'x', 'y', logx=True), 0)
        self.assertFalse(os.path.exists(os.path.join(d, 'e.png')))

    def test_close_point_labels_are_stacked(self):
        plt = report.pyplot()
        fig, ax = plt.subplots()
        ax.scatter([0, 0, 1], [0, 0, 1])
        report._annotate(ax, [(0, 0, 'a'), (0, 0, 'b'), (1, 1, 'c')])  # pylint: disable=protected-access
        fig.canvas.draw()
        boxes = {t.get_text(): t.get_window_extent() for t in ax.texts}
        self.assertFalse(boxes['a'].overlaps(boxes['b']))
        self.assertEqual(np.asarray(ax.texts[2].xyann).tolist(), [4, 3])  # a lone point keeps the default offset
        plt.close(fig)


if __name__ == '__main__':
    absltest.main()
