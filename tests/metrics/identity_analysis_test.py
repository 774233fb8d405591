"""Tests for extreme_mem/metrics/identity_analysis.py against slow loops and hand-made cases."""

import numpy as np
import tensorflow as tf

from extreme_mem.metrics import identity_analysis as ia
from extreme_mem.models import identity_nets


class IdentityAnalysisTest(tf.test.TestCase):

    def test_similarity_classifier_matches_loop(self):
        rng = np.random.default_rng(0)
        tr, te = rng.normal(size=(12, 4)), rng.normal(size=(7, 4))
        ytr, yte = rng.integers(0, 3, 12), rng.integers(0, 3, 7)
        wrong = 0
        for i in range(7):
            scores = np.zeros(3)
            for j in range(12):
                scores[ytr[j]] += te[i] @ tr[j]
            wrong += int(np.argmax(scores) != yte[i])
        self.assertAllClose(ia.similarity_classifier_error(tr, ytr, te, yte, 3), wrong / 7)

    def test_chain_activations_end_with_model_output(self):
        model = identity_nets.identity_cnn((6, 6, 1), depth=2, channels=3, seed=0)
        x = np.random.default_rng(0).normal(size=(2, 6, 6, 1)).astype(np.float32)
        acts = list(ia.chain_activations(model, x))
        self.assertEqual([k for k, _ in acts], ['input', 'conv1', 'conv2', 'output'])
        self.assertAllClose(acts[-1][1], model(x), atol=1e-6)
        conv1 = model.get_layer('conv1')
        expected = np.maximum(0, tf.nn.conv2d(x, conv1.kernel, 1, 'SAME').numpy() + conv1.bias.numpy())
        self.assertAllClose(acts[1][1], expected, atol=1e-5)

    def test_layerwise_errors_of_input_layer(self):
        # Two well-separated classes: the input layer classifies them perfectly.
        tr = np.concatenate([np.full((3, 4, 4, 1), 1.0), np.full((3, 4, 4, 1), -1.0)]).astype(np.float32)
        model = identity_nets.identity_cnn((4, 4, 1), depth=1, channels=2, kernel_size=3, seed=0)
        errors = ia.layerwise_errors(model, tr, np.array([0, 0, 0, 1, 1, 1]), tr[[0, 5]], np.array([0, 1]), 2)
        self.assertEqual(list(errors), ['input', 'conv1', 'output'])
        self.assertEqual(errors['input'], 0.0)

    def test_top_singular_image_of_rank_one_activation(self):
        spatial = np.random.default_rng(0).normal(size=(5, 5))
        act = spatial[..., None] * np.array([1.0, -2.0, 0.5])[None, None]  # channel c = a_c · spatial
        top = ia.top_singular_image(act)
        self.assertAllClose(abs(np.corrcoef(top.ravel(), spatial.ravel())[0, 1]), 1.0)

    def test_max_correlated_channel(self):
        rng = np.random.default_rng(1)
        image = rng.normal(size=(4, 4, 1))
        act = np.stack([rng.normal(size=(4, 4)), 3 * image[..., 0] + 1, rng.normal(size=(4, 4))], -1)
        self.assertAllClose(ia.max_correlated_channel(act, image), act[..., 1])

    def test_size_correlations_of_identity(self):
        x = np.random.default_rng(0).uniform(size=(2, 8, 8, 1)).astype(np.float32)
        out = ia.size_correlations(lambda b: b, x, [4, 16])
        self.assertEqual(sorted(out), [4, 16])
        self.assertAllClose(list(out.values()), [1.0, 1.0])
        self.assertEqual(ia.resize_images(x, 16).shape, (2, 16, 16, 1))

    def test_image_grid(self):
        grid = ia.image_grid([[np.zeros((2, 2)), np.arange(4.0).reshape(2, 2)], [np.ones((3, 1))]], pad=1)
        self.assertEqual(grid.shape, (2 * 4, 2 * 3))
        self.assertAllClose(grid[0:2, 3:5], np.arange(4.0).reshape(2, 2) / 3)
        self.assertAllClose(grid[0:2, 0:2], np.full((2, 2), 0.5))  # constant image: mid grey


if __name__ == '__main__':
    tf.test.main()
