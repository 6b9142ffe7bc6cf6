#!/usr/bin/env python3
"""A policy spec means one thing, in colod and in `colo sim`, through the real binaries.

Both read it once, the same way: the driver's defaults (colod's [gates], colo sim's --margin and
--smact-max), then what a CARMA name sets, then the spec's own settings, which win. colod refuses,
with the reason, what only colo sim can do (an estimator of its own, the shards baseline), and
`colod --check-config` refuses a spec it could not run.
"""

import json
import os
import shutil
import subprocess

import harness


def colod_check(*args, config=None):
    argv = [harness.COLOD, "--check-config"] + list(args)
    if config:
        argv += ["--config", config]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def colod_policy_line(result):
    """The policy line `colod --check-config` prints."""
    for line in result.stdout.splitlines():
        if line.startswith("# placement policy: "):
            return line[len("# placement policy: "):]
    raise AssertionError(f"no policy line in:\n{result.stdout}")


def sim_show(*args):
    return subprocess.run([harness.COLO, "sim", "--show-policy"] + list(args),
                          capture_output=True, text=True, timeout=30)


class PolicySpecTest(harness.E2ETest):
    def test_colod_and_colo_sim_read_a_spec_alike(self):
        for spec in ("worst-fit", "worst-fit:margin=5GiB", "OR-LUG", "OR-MAGM", "oracle-MAGM",
                     "EST-MAGM", "least-utilized:smact=0.5,recovery=thesis",
                     "worst-fit:share=plain,learn=off", "round-robin:gates=none,est=none"):
            colod = colod_check("--policy", spec)
            self.assertEqual(colod.returncode, 0, f"{spec}: {colod.stderr}")
            sim = sim_show("--policy", spec)
            self.assertEqual(sim.returncode, 0, f"{spec}: {sim.stderr}")
            self.assertEqual(colod_policy_line(colod), sim.stdout.strip(), spec)

    def test_the_specs_own_margin_wins_over_the_configs(self):
        self.assertIn("margin 5.0 GiB", colod_policy_line(colod_check("--policy",
                                                                      "worst-fit:margin=5GiB")))
        # CARMA's OR- names plan without a memory number, with 5 GiB free.
        for name in ("OR-LUG", "OR-MAGM"):
            line = colod_policy_line(colod_check("--policy", name))
            self.assertIn("margin 5.0 GiB, 512 MiB held back", line)
            self.assertIn("estimator none; recovery thesis", line)
        config = harness.write_config(os.path.join(self.tmp, "gates.toml"),
                                      {"gates": {"memory_margin": "3GiB"}})
        self.assertIn("margin 3.0 GiB",
                      colod_policy_line(colod_check("--policy", "worst-fit", config=config)))
        self.assertIn("margin 5.0 GiB",
                      colod_policy_line(colod_check("--policy", "worst-fit:margin=5GiB",
                                                    config=config)))
        self.assertIn("margin 5.0 GiB",
                      colod_policy_line(colod_check("--policy", "OR-MAGM", config=config)))
        self.assertIn("margin 3.0 GiB", sim_show("--policy", "worst-fit", "--margin", "3GiB").stdout)

    def test_what_only_colo_sim_can_do_is_refused_by_colod_with_the_reason(self):
        sim = sim_show("--policy", "EST-MAGM-Horus")
        self.assertEqual(sim.returncode, 0, sim.stderr)
        self.assertIn("estimator rad:horus", sim.stdout)
        colod = colod_check("--policy", "EST-MAGM-Horus")
        self.assertEqual(colod.returncode, 2, colod.stdout)
        self.assertNotIn("config ok", colod.stdout)
        self.assertIn("rad:horus, which only colo sim has", colod.stderr)
        colod = colod_check("--policy", "shards:n=2")
        self.assertEqual(colod.returncode, 2, colod.stdout)
        self.assertIn("colo sim's baseline of Slurm's shard GRES", colod.stderr)

    def test_an_unknown_policy_is_refused_by_both(self):
        colod = colod_check("--policy", "bogus")
        self.assertEqual(colod.returncode, 2, colod.stdout)
        self.assertNotIn("config ok", colod.stdout)
        self.assertIn("unknown policy 'bogus'", colod.stderr)
        sim = sim_show("--policy", "bogus")
        self.assertEqual(sim.returncode, 2)
        self.assertIn("unknown policy 'bogus'", sim.stderr)
        # And colod does not start with it.
        daemon = self.colod(start=False, extra_args=["--policy", "worst-fit:margin=many"])
        proc = daemon.spawn()
        self.assertEqual(proc.wait(timeout=30), 2)
        with open(daemon.log_path) as f:
            self.assertIn("margin", f.read())

    def test_colo_sim_plans_with_the_specs_estimator_and_margin(self):
        """Two CIFAR tasks (measured peak 858 MiB, Horus 6398 MiB) on one H100 with room for
        both only by their measured peak: EST-MAGM-Horus plans with Horus' line and runs them
        one after the other, oracle-MAGM and EST-MAGM (no estimator named: the measured line,
        as CARMA) share the GPU after the launch grace; a spec's margin=5GiB is the margin
        whatever --margin says, and OR-MAGM plans with its own 5 GiB."""
        task = os.path.join(harness.DATA_DIR, "carma", "workloads",
                            "resnet18_cifar100_20e_3.rad")
        for name in ("a", "b"):
            shutil.copy(task, os.path.join(self.tmp, name + ".rad"))
        self.write(os.path.join(self.tmp, "pair.sh"),
                   "python3 submit.py --task a.rad\npython3 submit.py --task b.rad\n")

        def second_start(*args):
            r = self.colo("sim", "--trace", "carma:pair.sh", "--server", "h100x1", "--json",
                          "--with-jobs", *args, cwd=self.tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            [run] = json.loads(r.stdout)["runs"]
            self.assertEqual([j["ooms"] for j in run["job_results"]], [0, 0])
            return run["estimator"], run["job_results"][1]["start_s"]

        shared, alone = 30.0, 192.0  # after the launch grace; after the first job's end
        for spec, estimator, start in (("oracle-MAGM", "rad:oracle", shared),
                                       ("EST-MAGM", "rad:oracle", shared),
                                       ("EST-MAGM-Horus", "rad:horus", alone)):
            with self.subTest(spec=spec):
                got = second_start("--gpu-free", "9GiB", "--policy", spec)
                self.assertEqual(got[0], estimator)
                self.assertAlmostEqual(got[1], start, delta=1)
        # 6 GiB free: the second task fits beside the first with a 2 GiB margin, not with 5.
        for args, start in ((["--policy", "worst-fit:est=rad:oracle"], shared),
                            (["--policy", "worst-fit:est=rad:oracle,margin=5GiB"], alone),
                            (["--margin", "5GiB", "--policy", "worst-fit:est=rad:oracle,margin=2GiB"],
                             shared),
                            (["--policy", "OR-MAGM"], alone),
                            (["--policy", "OR-MAGM:margin=2GiB"], shared)):
            with self.subTest(args=args):
                self.assertAlmostEqual(second_start("--gpu-free", "6GiB", *args)[1], start,
                                       delta=1)

    def test_colod_places_with_the_specs_margin(self):
        # Fake GPUs have 80 GiB: 76 GiB and the spec's 5 GiB margin can never fit (with the
        # config's 2 GiB they would).
        daemon = self.colod(fake_gpus=1, extra_args=["--policy", "worst-fit:margin=5GiB"])
        refused = self.colo("submit", "--mem", "76GiB", "--json", "--", "true", daemon=daemon)
        self.assertEqual(refused.returncode, 1, refused.stdout)
        self.assertIn("including the policy's margin", refused.stdout)
        self.assertIn('"infeasible"', refused.stdout)
        job = self.submit("--mem", "74GiB", "--", "true", daemon=daemon)
        self.assert_succeeded(job, daemon=daemon)

    def test_colod_plans_without_a_memory_number_under_an_or_name(self):
        daemon = self.colod(fake_gpus=1, extra_args=["--policy", "OR-MAGM"])
        job = self.submit("--mem", "70GiB", "--", "true", daemon=daemon)
        detail = self.assert_succeeded(job, daemon=daemon)
        self.assertEqual(detail["memory"], 70 << 30, "what the job declared is kept")
        # Placed with no need of its own: the attempt's limit is what it was seen to use.
        self.assertEqual(detail["attempt_list"][0]["memory_limit"], 0)


if __name__ == "__main__":
    harness.main()
