"""Scheduled prompts: the jobs and runs in the database (:mod:`.store`), schedules, delivery
targets and the due/missed plan (:mod:`.schedule`), and the runner that claims, runs, delivers
and records them on APScheduler (:mod:`.runner`)."""
