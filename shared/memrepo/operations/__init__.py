"""Operating memories like code: revert a session, rebuild from transcripts, mirror, onboard.

Modules (imported on demand, this package imports nothing):

* :mod:`~memrepo.operations.apply` — apply a change to a user's repository with optimistic
  concurrency (hydrate at a token, change, save with the token as precondition, retry), shared by
  the session writer and every operation here;
* :mod:`~memrepo.operations.revert` — undo one session as a new commit;
* :mod:`~memrepo.operations.rebuild` — replay the archived transcripts with the current engine;
* :mod:`~memrepo.operations.mirror` — push a user's branch to a git remote;
* :mod:`~memrepo.operations.onboard` — create a user's memory from a profile before any session;
* :mod:`~memrepo.operations.inspect` — read-only views (show, blame, log) for the CLI.
"""
