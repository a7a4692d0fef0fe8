"""The readers of the SNN benchmarks (`examples/snn_benchmarks/snn_data.py`).

The formats are tested on small files written here; the real data (found through
`NORMKIT_UCI121_DATA`, `NORMKIT_HTRU2_DATA`, `NORMKIT_TOX21_DATA`, which `.ci/run` sets when
`../shared/data/<name>` exists) is read when it is configured, and those tests skip otherwise.
"""

import gzip
import os
import pathlib
import sys
import tarfile

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "snn_benchmarks"
sys.path.insert(0, str(BENCH))

import snn_data  # noqa: E402

sys.path.remove(str(BENCH))


def real(variable, what):
    path = os.environ.get(variable)
    if not path or not pathlib.Path(path).exists():
        pytest.skip(f"the real {what} data is not configured: set {variable} to its folder")
    return path


def write_set(root, name, x, y, train, test, two_files=False, arff=False):
    """A data set in the Fernández-Delgado layout, written independently of the reader."""
    folder = root / name
    folder.mkdir(parents=True)
    fich1 = f"{name}_train_R.dat" if two_files else f"{name}_R.dat"
    lines = [f"n_entradas= {x.shape[1]}", f"n_clases= {y.max() + 1}"]
    lines += [f"n_arquivos= {2 if two_files else 1}", f"fich1= {fich1}", f"n_patrons1= {len(x)}"]
    if two_files:
        lines += [f"fich2= {name}_test_R.dat", "n_patrons2= 3"]
        (folder / f"{name}_test_R.dat").write_text("\tf1\tclase\n1\t9.0\t0\n2\t9.0\t0\n3\t9.0\t0\n")
    lines += [f"n_patrons_entrena= {len(train)}", f"n_patrons_valida= {len(test)}"]
    (folder / f"{name}.txt").write_text("\n".join(lines) + "\n")
    header = "\t" + "\t".join(f"f{j + 1}" for j in range(x.shape[1])) + "\tclase\n"
    if arff:
        text = "@relation t\n" + "".join(f"@attribute f{j} real\n" for j in range(x.shape[1]))
        text += "@attribute clase {0,1,2}\n@data\n"
        text += "".join(
            ",".join(f"{v:g}" for v in row) + f",{c}\n" for row, c in zip(x, y, strict=True)
        )
        (folder / fich1.replace("_R.dat", ".arff")).write_text(text)
    else:
        body = "".join(
            f"{i + 1}\t" + "\t".join(f"{v:g}" for v in row) + f"\t{c}\n"
            for i, (row, c) in enumerate(zip(x, y, strict=True))
        )
        (folder / fich1).write_text(header + body)
    split = " ".join(map(str, train)) + " \n" + " ".join(map(str, test)) + " \n"
    (folder / "conxuntos.dat").write_text(split)


@pytest.fixture
def toy(tmp_path):
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=(10, 3)), 4)
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    train, test = [7, 0, 3, 9, 5], [1, 2, 4, 6, 8]
    root = tmp_path / "uci121"
    write_set(root, "one", x, y, train, test)
    write_set(root, "two", x, y, train, test, two_files=True)
    write_set(root, "arff", x, y, train, test, arff=True)
    (root / "gone").mkdir()
    (root / "gone" / "gone.txt").write_text(
        "n_entradas= 3\nn_clases= 2\nfich1= gone_R.dat\nn_patrons1= 5000\n"
    )
    (root / "gone" / "conxuntos.dat").write_text("0\n1\n")
    return root, x, y, train, test


@pytest.mark.parametrize("name", ["one", "two", "arff"])
def test_uci_split_follows_conxuntos(toy, name):
    root, x, y, train, test = toy
    data = snn_data.UCI121(root).load(name)
    np.testing.assert_allclose(data.x_train, x[train], atol=1e-6)
    np.testing.assert_array_equal(data.y_train, y[train])
    np.testing.assert_allclose(data.x_test, x[test], atol=1e-6)
    np.testing.assert_array_equal(data.y_test, y[test])
    assert data.n_classes == 3
    # the separate test file is not part of the split, but counts in the size
    assert data.n_examples == (13 if name == "two" else 10)


def test_uci_incomplete_sets_and_archives(toy, tmp_path):
    root = toy[0]
    uci = snn_data.UCI121(root.parent)  # the parent folder works too
    assert uci.names == ["arff", "gone", "one", "two"]
    assert uci.complete() == ["arff", "one", "two"]
    assert uci.complete(min_examples=11) == ["two"]
    assert uci.info("gone")["n_examples"] == 5000 and not uci.info("gone")["complete"]
    with pytest.raises(FileNotFoundError, match="gone_R.dat"):
        uci.load("gone")
    with pytest.raises(KeyError, match="nope"):
        uci.load("nope")
    archive = tmp_path / "archive" / "uci.tar.xz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(root, arcname="uci121")
    for path in (archive, archive.parent):
        from_tar = snn_data.UCI121(path).load("two")
        np.testing.assert_array_equal(from_tar.x_test, uci.load("two").x_test)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no UCI data set"):
        snn_data.UCI121(tmp_path / "empty")


def test_htru2_arff_with_cr_line_endings(tmp_path):
    text = "@relation HTRU\r@attribute a real\r@attribute b real\r@attribute class {0,1}\r"
    text += "@data\r1.5,2,0\r3,4.25,1\r"
    (tmp_path / "HTRU_2.arff").write_text(text)
    x, y = snn_data.load_htru2(tmp_path)
    np.testing.assert_array_equal(x, [[1.5, 2], [3, 4.25]])
    np.testing.assert_array_equal(y, [0, 1])


def test_tox21_csv_gz(tmp_path):
    header = ",".join(snn_data.TOX21_TASKS) + ",mol_id,smiles\n"
    rows = ["0," * 11 + "1,TOX1,CCO\n", ",1" + ",0" * 9 + ",,TOX2,c1ccccc1\n"]
    (tmp_path / "tox21.csv.gz").write_bytes(gzip.compress((header + "".join(rows)).encode()))
    smiles, labels, tasks = snn_data.load_tox21(tmp_path)
    assert smiles == ["CCO", "c1ccccc1"] and tasks == snn_data.TOX21_TASKS
    assert labels.shape == (2, 12) and labels[0, 11] == 1 and labels[0, 0] == 0
    assert np.isnan(labels[1, 0]) and np.isnan(labels[1, 11]) and labels[1, 1] == 1


def test_morgan_fingerprints_match_rdkit():
    pytest.importorskip("rdkit")
    from rdkit import Chem, DataStructs
    from rdkit.Chem import rdMolDescriptors

    features, valid = snn_data.morgan_fingerprints(["CCO", "not a molecule", "c1ccccc1O"])
    assert features.shape == (3, 2048) and valid.tolist() == [True, False, True]
    assert features[1].sum() == 0
    for row, smiles in ((0, "CCO"), (2, "c1ccccc1O")):
        # the older RDKit API, independently: ECFP4 = Morgan radius 2
        bits = rdMolDescriptors.GetMorganFingerprintAsBitVect(Chem.MolFromSmiles(smiles), 2, 2048)
        expected = np.zeros(2048)
        DataStructs.ConvertToNumpyArray(bits, expected)
        np.testing.assert_array_equal(features[row], expected)


# The real data (skipped unless configured).


def test_real_uci121():
    uci = snn_data.UCI121(real("NORMKIT_UCI121_DATA", "UCI-121"))
    assert len(uci.names) == 121
    large = uci.complete(1000)
    # 46 sets have >= 1000 examples; adult, connect-4, miniboone and musk-2 lack a data file
    assert len([n for n in uci.names if uci.info(n)["n_examples"] >= 1000]) == 46
    assert len(large) == 42 and "statlog-shuttle" in large and "adult" not in large
    abalone = uci.load("abalone")
    assert abalone.x_train.shape == (2089, 8) and abalone.x_test.shape == (2088, 8)
    assert abalone.n_classes == 3 and set(np.unique(abalone.y_test)) == {0, 1, 2}
    # the features are standardized over the whole set (Fernández-Delgado's preprocessing)
    x = np.concatenate([abalone.x_train, abalone.x_test])
    np.testing.assert_allclose(x.mean(0), 0, atol=1e-3)
    np.testing.assert_allclose(x.std(0), 1, atol=1e-3)
    shuttle = uci.load("statlog-shuttle")  # from its .arff
    assert shuttle.x_train.shape == (21750, 9) and shuttle.n_classes == 7


def test_real_htru2():
    x, y = snn_data.load_htru2(real("NORMKIT_HTRU2_DATA", "HTRU2"))
    assert x.shape == (17898, 8) and int(y.sum()) == 1639


def test_real_tox21():
    smiles, labels, _ = snn_data.load_tox21(real("NORMKIT_TOX21_DATA", "Tox21"))
    assert len(smiles) == labels.shape[0] == 8014 and labels.shape[1] == 12
    measured = ~np.isnan(labels)
    assert measured.sum(0).min() > 5000 and set(np.unique(labels[measured])) == {0.0, 1.0}
