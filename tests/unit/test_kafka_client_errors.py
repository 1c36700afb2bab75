"""Which client errors mean "no answer" (retry, then read back) and which are a broker's refusal."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from dr_toolkit.errors import DrtError, UnreachableError
from dr_toolkit.kafka.client import KafkaCluster

NO_ANSWER = [KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
             KafkaError._DESTROY, KafkaError._DESTROY_BROKER, KafkaError._FAIL, KafkaError.NOT_COORDINATOR]


@pytest.mark.parametrize("code", NO_ANSWER)
def test_errors_without_an_answer_are_unreachable(code: int) -> None:
    # _DESTROY is what a commit in flight gets when the broker is killed under it (seen in CI):
    # its outcome is unknown, so it must be retried and read back, never reported as a refusal.
    err = KafkaCluster("127.0.0.1:1")._wrap(KafkaException(KafkaError(code)), "commit offsets of group 'g'")
    assert isinstance(err, UnreachableError)


def test_a_refusal_is_not_unreachable() -> None:
    err = KafkaCluster("127.0.0.1:1")._wrap(KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)),
                                            "commit offsets of group 'g'")
    assert isinstance(err, DrtError) and not isinstance(err, UnreachableError)
    assert "refused commit offsets" in err.what
