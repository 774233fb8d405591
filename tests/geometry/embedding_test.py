"""Tests for extreme_mem/geometry/embedding.py against scikit-learn's PCA."""

from unittest import mock

import numpy as np
import tensorflow as tf
from sklearn import decomposition

from extreme_mem.geometry import embedding


class EmbeddingTest(tf.test.TestCase):

    def test_pca_matches_sklearn_up_to_sign(self):
        x = np.random.default_rng(0).normal(size=(40, 6)) * np.array([5.0, 3.0, 1.0, 0.5, 0.2, 0.1])
        ours = embedding.pca_2d(x)
        theirs = decomposition.PCA(n_components=2).fit_transform(x)
        for k in range(2):
            sign = np.sign(ours[0, k] * theirs[0, k])
            self.assertAllClose(ours[:, k], sign * theirs[:, k], atol=1e-8)

    def test_auto_falls_back_to_pca_without_umap(self):
        x = np.random.default_rng(1).normal(size=(10, 3, 2))
        with mock.patch.object(embedding, 'umap_available', return_value=False):
            coords, name = embedding.embed_2d(x)
            self.assertEqual(name, 'PCA')
            self.assertEqual(coords.shape, (10, 2))
            with self.assertRaisesRegex(ValueError, 'umap-learn'):
                embedding.embed_2d(x, method='umap')

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "Unknown embedding method 'tsne'; valid: \\['auto', 'pca', 'umap'\\]"):
            embedding.embed_2d(np.zeros((3, 2)), method='tsne')
        with self.assertRaisesRegex(ValueError, 'at least 2 points'):
            embedding.embed_2d(np.zeros((1, 2)), method='pca')


if __name__ == '__main__':
    tf.test.main()
