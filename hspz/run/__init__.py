"""Running a frozen job: the request, freezing, the worker loop and process pool, emitting and
publishing into OUT (lock, journal, digest), a query-list run's job entries, and the reports."""
