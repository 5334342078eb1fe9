"""Sites layer: the per-site pre-pass. A scenario with ``[[site]]`` tables is reduced to the one
configuration of identical nodes with the same paced figures (`reduce`), its sync paced over the
real links (`links`) and per group for the grouped algorithms (`groups`), and a ``[[churn]]``
schedule cut into paced segments (`churn`). It uses the kernel (it evaluates it per site and per
group); the kernel never imports it. Depends on `inputs` and `kernel`."""
