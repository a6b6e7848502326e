from espnet_ext.errors import ConfigError, InputError, reports_input_errors


def test_input_error_names_file_line_and_key():
    assert str(InputError("bad", path="data/text", line=3)) == "data/text:3: bad"
    assert str(InputError("bad", path="data/text", key="utt1")) == "data/text: key 'utt1': bad"
    assert str(ConfigError("must be > 0", key="--nj")) == "key '--nj': must be > 0"


def test_reports_input_errors_turns_the_error_into_status_1(capsys):
    @reports_input_errors
    def main(argv=None):
        if argv:
            raise InputError("no such speaker", path=argv[0], line=7)

    assert main(["spk2utt"]) == 1
    assert capsys.readouterr().err == "error: spk2utt:7: no such speaker\n"
    assert main([]) == 0
    assert main.__name__ == "main"


def test_reports_input_errors_lets_other_errors_through():
    @reports_input_errors
    def main(argv=None):
        raise RuntimeError("a bug, not bad input")

    try:
        main()
    except RuntimeError as e:
        assert "a bug" in str(e)
    else:
        raise AssertionError("RuntimeError was swallowed")
