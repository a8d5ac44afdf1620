"""observability.py catches what it is for: expressions that do not parse
and metrics no binary exports."""

import unittest

from observability import dashboard_expressions, exported_metrics, problems, rule_expressions, scaler_expressions


class ObservabilityChecks(unittest.TestCase):
    def test_the_shipped_rules_and_dashboard_pass(self) -> None:
        expressions = rule_expressions() + dashboard_expressions()
        self.assertGreater(len(expressions), 20)
        self.assertEqual(problems(expressions, exported_metrics()), [])

    def test_each_worker_pool_scales_on_its_tools_backlog(self) -> None:
        queries = dict(scaler_expressions())
        self.assertEqual(len(queries), 3, queries)
        for query in queries.values():
            self.assertIn("taskstore_dispatch_waiting{tool=~", query)
        self.assertEqual(problems(list(queries.items()), exported_metrics()), [])

    def test_histograms_export_their_series(self) -> None:
        exported = exported_metrics()
        self.assertIn("taskstore_queue_wait_seconds_bucket", exported)
        self.assertIn("taskworker_slots_busy", exported)
        self.assertNotIn("taskstore_tasks_bucket", exported)

    def test_broken_expressions_and_unknown_metrics_are_named(self) -> None:
        exported = {"taskstore_queue_up"}
        found = problems(
            [
                ("good", "max(taskstore_queue_up) == 0"),
                ("unclosed", "sum(rate(taskstore_queue_up[5m])"),
                ("renamed", "max(taskstore_queue_upp) == 0"),
            ],
            exported,
        )
        self.assertEqual(len(found), 2, found)
        self.assertTrue(found[0].startswith("unclosed: does not parse"))
        self.assertIn("taskstore_queue_upp", found[1])


if __name__ == "__main__":
    unittest.main()
