"""What crosses a process boundary, and nothing else: the parent's jobs and the worker's events
(``protocol``), the judge's requests to a side's worker and its replies (``sideproto``), the
buffers the judge lends a side (``lending``), the stream operations that gate a side's call on the
judge's go (``streamops``) and the pipe that ends a worker with its parent (``lifeline``). Both
sides of every boundary import these, so they load no kernel, time nothing and judge nothing."""
