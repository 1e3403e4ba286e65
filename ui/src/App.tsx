// The dashboard's routes (under /ui): sign-in outside the frame, every other page inside Layout; an
// unknown address gets the not-found page (with the way back), not a silent redirect.
import { Route, Routes } from 'react-router-dom';
import { Layout } from './components';
import { ActionDetail } from './pages/ActionDetail';
import { Actions } from './pages/Actions';
import { ApiKeys } from './pages/ApiKeys';
import { CampaignDetail } from './pages/CampaignDetail';
import { CampaignEdit } from './pages/CampaignEdit';
import { Campaigns } from './pages/Campaigns';
import { CronJobDetail } from './pages/CronJobDetail';
import { CronJobForm } from './pages/CronJobForm';
import { CronJobs } from './pages/CronJobs';
import { CronRun } from './pages/CronRun';
import { NotFound } from './pages/NotFound';
import { Outbox } from './pages/Outbox';
import { Overview } from './pages/Overview';
import { Recipients } from './pages/Recipients';
import { SignIn } from './pages/SignIn';

export function App() {
  return (
    <Routes>
      <Route path="/signin" element={<SignIn />} />
      <Route element={<Layout />}>
        <Route index element={<Overview />} />
        <Route path="campaigns" element={<Campaigns />} />
        <Route path="campaigns/:id" element={<CampaignDetail />} />
        <Route path="campaigns/:id/edit" element={<CampaignEdit />} />
        <Route path="recipients" element={<Recipients />} />
        <Route path="actions" element={<Actions />} />
        <Route path="actions/:id" element={<ActionDetail />} />
        <Route path="cron" element={<CronJobs />} />
        <Route path="cron/new" element={<CronJobForm />} />
        <Route path="cron/:id" element={<CronJobDetail />} />
        <Route path="cron/:id/edit" element={<CronJobForm />} />
        <Route path="cron-runs/:id" element={<CronRun />} />
        <Route path="outbox" element={<Outbox />} />
        <Route path="api-keys" element={<ApiKeys />} />
        <Route path="*" element={<NotFound />} />
      </Route>
    </Routes>
  );
}
