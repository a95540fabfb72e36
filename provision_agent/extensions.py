"""Step kinds a site adds without a fork: stevedore namespace `provision_agent.step_kinds`.

Placeholder until the loader lands: no plug-in kinds.
"""


def handlers(executor):
    return {}
