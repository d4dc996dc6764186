"""Where the JVM jars come from (harness.jvm.artifacts.source): a mirror from the environment, the user's own
Maven settings when they declare a mirror, else Maven Central only."""
from __future__ import annotations

import pytest

from harness.errors import InputError
from harness.jvm import artifacts


def test_maven_central_without_a_mirror(tmp_path):
    src = artifacts.source({}, tmp_path / "absent.xml")
    assert (src.what, src.base_url, src.settings_path) == ("Maven Central", artifacts.CENTRAL, artifacts.SETTINGS)


def test_the_users_settings_when_they_declare_a_mirror(tmp_path):
    plain, mirrored = tmp_path / "plain.xml", tmp_path / "mirrored.xml"
    plain.write_text("<settings><localRepository>/x</localRepository></settings>")
    mirrored.write_text("<settings><mirrors><mirror><id>corp</id><url>https://nexus.corp/m2</url>"
                        "<mirrorOf>*</mirrorOf></mirror></mirrors></settings>")
    assert artifacts.source({}, plain).what == "Maven Central"
    src = artifacts.source({}, mirrored)
    assert src.settings_path == mirrored and src.what == f"the mirror in {mirrored}"


def test_a_mirror_from_the_environment_wins_and_its_credentials_stay_there(tmp_path):
    mirrored = tmp_path / "mirrored.xml"
    mirrored.write_text("<settings><mirrors><mirror/></mirrors></settings>")
    env = {"HARNESS_MAVEN_MIRROR": "https://art.corp/artifactory/maven/", "HARNESS_MAVEN_USERNAME": "bot",
           "HARNESS_MAVEN_PASSWORD": "s3cret"}
    src = artifacts.source(env, mirrored)
    assert src.base_url == "https://art.corp/artifactory/maven" and src.settings_path is None
    text = src.settings_text
    assert "<url>https://art.corp/artifactory/maven</url>" in text and "<mirrorOf>*</mirrorOf>" in text
    assert "<username>${env.HARNESS_MAVEN_USERNAME}</username>" in text
    assert "<password>${env.HARNESS_MAVEN_PASSWORD}</password>" in text
    assert "s3cret" not in text and "bot" not in text
    anonymous = artifacts.source({"HARNESS_MAVEN_MIRROR": "http://nexus:8081/repository/central"}, mirrored)
    assert "<servers>" not in anonymous.settings_text


@pytest.mark.parametrize("env, says", [
    ({"HARNESS_MAVEN_MIRROR": "nexus.corp/m2"}, "a repository URL, http(s)://host/path"),
    ({"HARNESS_MAVEN_MIRROR": "https://bot:s3cret@nexus.corp/m2"}, "no credentials in the URL"),
    ({"HARNESS_MAVEN_MIRROR": "https://nexus.corp/m2", "HARNESS_MAVEN_PASSWORD": "s3cret"},
     "HARNESS_MAVEN_USERNAME is not set"),
])
def test_a_mirror_setting_that_cannot_work_is_bad_input(tmp_path, env, says):
    with pytest.raises(InputError) as info:
        artifacts.source(env, tmp_path / "absent.xml")
    assert says in str(info.value) and "s3cret" not in str(info.value)
