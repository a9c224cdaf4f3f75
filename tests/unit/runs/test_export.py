"""runs/export.py: the name an ONNX graph is written under."""
from __future__ import annotations

import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.export import check_onnx_name


@pytest.mark.parametrize("name, says", [("x.json", "a .json file"), ("m.pt", "a .pt file"), ("p.csv", "a .csv file"),
                                        ("d.parquet", "a .parquet file"), ("m.pkl", "a .pkl file"),
                                        ("s3://b/m.safetensors", "a .safetensors file"),
                                        ("m.onnx.gz", "gzip compression")])
def test_an_onnx_name_saying_another_kind_of_file_or_a_compression_is_refused_naming_onnx(name, says):
    # `export RUN --onnx x.json` wrote an ONNX graph under a name every other tool opens as JSON
    with pytest.raises(UserError, match=f"--onnx {name}: the name says {says}") as e:
        check_onnx_name(name)
    assert e.value.hint.startswith("end the name in .onnx: --onnx ") and e.value.hint.endswith(".onnx")


@pytest.mark.parametrize("name", ["m.onnx", "m.ONNX", "s3://b/models/m.onnx", "model", "m.v2", "/dev/stdout"])
def test_an_onnx_name_ending_in_onnx_or_in_no_known_extension_is_written(name):
    check_onnx_name(name)
