"""registry/change_signal.py: every mapping of one signal file sees every signal at once, and
each signal is a value the readers have not seen."""

from registry.change_signal import ChangeSignal


def test_a_signal_is_seen_through_every_mapping(tmp_path):
    path = tmp_path / "changes"
    writer, reader = ChangeSignal(path), ChangeSignal(path)
    assert path.stat().st_size == 8
    seen = {reader.value()}
    for _ in range(100):
        writer.signal()
        assert reader.value() == writer.value()
        assert reader.value() not in seen  # a fresh value each time, never one a reader kept
        seen.add(reader.value())


def test_an_existing_file_keeps_its_value(tmp_path):
    path = tmp_path / "changes"
    first = ChangeSignal(path)
    first.signal()
    assert ChangeSignal(path).value() == first.value()


def test_a_file_that_cannot_be_made_gives_no_signal(tmp_path):
    (tmp_path / "changes").mkdir()
    assert ChangeSignal.open(tmp_path / "changes") is None
    assert ChangeSignal.open(tmp_path / "missing-dir" / "changes") is None
