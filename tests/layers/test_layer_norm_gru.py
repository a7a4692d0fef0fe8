"""`LayerNormGRUCell` and `LayerNormGRU`: conformance (both `reset_after` variants are
checked against the NumPy reference in `test_layer_norm_rnn.py`, with the tests shared by
the three families).
"""

from keras_normkit.layers import LayerNormGRU, LayerNormGRUCell
from tests.conformance import RNN_SUPPORTS_MASKING, LayerConformanceTestCase

# --------------------------------------------------------------------------------------
# Conformance (RNN + Bidirectional for cells; the convenience layers on their own).
# --------------------------------------------------------------------------------------


class GRUConformanceTest(LayerConformanceTestCase):
    def test_gru_cell(self):
        self.run_cell_conformance_test(
            LayerNormGRUCell,
            {"units": 3, "reset_after": False},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 3),
            supports_masking=RNN_SUPPORTS_MASKING,
            expected_num_trainable_weights=9,
            atol=1e-5,
        )

    def test_gru_layer(self):
        self.run_conformance_test(
            LayerNormGRU,
            {"units": 3, "dropout": 0.2, "seed": 2},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 3),
            supports_masking=True,
            dynamic_axes=(1,),
            atol=1e-5,
        )
