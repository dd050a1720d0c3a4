"""``commcanary agent``: watching a running job's capture shards.

* :mod:`commcanary.agent.state`: the live view (per process, group,
  instance and step), bounded, saved and resumed;
* :mod:`commcanary.agent.follow`: reading the shards as they grow, from
  saved offsets, skipping what is damaged;
* :mod:`commcanary.agent.metrics`: the Prometheus exposition and the JSON
  status;
* :mod:`commcanary.agent.service`: the loop, hang alarms with the evidence
  they collect, and the HTTP endpoints;
* :mod:`commcanary.agent.peers`: the agents of other nodes, joined.

The processes' side (progress notes, evidence on a signal) is
:mod:`commcanary.capture.live`.
"""
