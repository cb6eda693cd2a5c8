import time


def fetch_with_retry(fetch, attempts=5):
    """Call fetch until it succeeds."""
    for i in range(attempts):
        try:
            return fetch()
        except Exception:  # swallows every error, including KeyboardInterrupt's cousins
            time.sleep(1)  # fixed delay: every client retries in lockstep
    return None  # the caller cannot tell failure from an empty result
